"""LCORE's `conversation_cache` and `user_data_collection` sections (issue 22), typed:
every LCORE sub-key is accepted (docs/architecture.md, decision 5: configuration is LCORE's).

`conversation_cache` turns `/v2/conversations` on: LCORE serves it from a cache of its
own (`memory`, `sqlite`, `postgres`); the gateway serves it from its own database (the
turn store), so the cache's own storage keys are accepted and not used.
`user_data_collection` is feedback (`feedback_enabled`, JSON files under
`feedback_storage`) and transcripts (`transcripts_enabled`, `transcripts_storage`).
`conversation_expiry` is ours (LCORE has none): an idle TTL after which a sweep deletes
a conversation.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from gateway.config.base import Strict
from gateway.config.database import SQLiteConfig


class MemoryCacheConfig(Strict):
    max_entries: int = Field(1000, gt=0)


class CachePostgresConfig(Strict):
    """LCORE's cache database keys: checked for typos, otherwise unused (no connection
    is made, so nothing about them is required)."""

    host: str | None = None
    port: int | None = None
    db: str | None = None
    user: str | None = None
    password: SecretStr | None = None   # never shown
    namespace: str | None = None
    ssl_mode: str | None = None
    gss_encmode: str | None = None
    ca_cert_path: str | None = None


class ConversationCacheConfig(Strict):
    type: Literal["noop", "memory", "sqlite", "postgres"] | None = None
    memory: MemoryCacheConfig | None = None
    # LCORE's cache databases: accepted (an LCORE file starts), not used: `/v2` reads the
    # gateway's own database.
    sqlite: SQLiteConfig | None = None
    postgres: CachePostgresConfig | None = None

    @property
    def configured(self) -> bool:
        """LCORE answers `/v2` only with a cache type set."""
        return self.type is not None


class UserDataCollectionConfig(Strict):
    feedback_enabled: bool = False
    feedback_storage: str | None = None
    transcripts_enabled: bool = False
    transcripts_storage: str | None = None

    @model_validator(mode="after")
    def _storage_when_enabled(self) -> "UserDataCollectionConfig":
        # LCORE's own checks: where to write must be said when writing is on.
        if self.feedback_enabled and not self.feedback_storage:
            raise ValueError("feedback_storage is required when feedback is enabled")
        if self.transcripts_enabled and not self.transcripts_storage:
            raise ValueError("transcripts_storage is required when transcripts are enabled")
        return self


class ConversationExpiryConfig(Strict):
    """Ours. Off by default: a conversation without a turn for `idle_ttl_seconds` is
    unknown to every endpoint and deleted (with what is stored for it and its upstream
    state) by a sweep every `sweep_interval_seconds`, once across replicas."""

    idle_ttl_seconds: int | None = Field(None, gt=0)
    sweep_interval_seconds: float = Field(60.0, gt=0)
