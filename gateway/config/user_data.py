"""LCORE's `conversation_cache` and `user_data_collection` sections (issue 22), typed:
every LCORE sub-key is accepted (DESIGN decision 5).

`conversation_cache` turns `/v2/conversations` on: LCORE serves it from a cache of its
own (`memory`, `sqlite`, `postgres`); the gateway serves it from its own database (the
turn store), so the cache's own storage keys are accepted and not used.
`user_data_collection` is feedback (`feedback_enabled`, JSON files under
`feedback_storage`) and transcripts (`transcripts_enabled`, `transcripts_storage`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.base import Strict


class MemoryCacheConfig(Strict):
    max_entries: int = Field(1000, gt=0)


class ConversationCacheConfig(Strict):
    type: Literal["noop", "memory", "sqlite", "postgres"] | None = None
    memory: MemoryCacheConfig | None = None
    # LCORE's cache databases: accepted (an LCORE file starts), not used: `/v2` reads the
    # gateway's own database.
    sqlite: dict[str, Any] | None = None
    postgres: dict[str, Any] | None = None

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
