"""The `response_compaction` section (ours): `POST /v1/responses/compact` and the
`compaction` items it returns, on by default. Not LCORE's `compaction` key, which means automatic
compaction there and is accepted but not built here."""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.config.base import Strict

# What the model is asked, as the last user message after the window it summarizes.
DEFAULT_PROMPT = (
    "Summarize the conversation above so that it can continue from the summary alone. Keep every fact, "
    "name, number, decision, open question and instruction the user gave, and what was already answered. "
    "Write only the summary, in the conversation's language, without any preamble.")


class CompactionKey(Strict):
    # Written in front of every item it seals, so an item names the key that opens it.
    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    # At least 32 characters (an AES-256 key is derived from it with HKDF-SHA256); use
    # `${env.VAR}` so it is not in the file.
    secret: str = Field(min_length=32, repr=False)


class ResponseCompactionConfig(Strict):
    # Newest first: the first key seals new items, every key opens the items it sealed.
    # None: a key the gateway generates once and keeps in its database seals (every
    # replica and worker on that database shares it); once keys are configured it still
    # opens the items it sealed (gateway/compaction/keys.py).
    keys: list[CompactionKey] = []
    prompt: str = Field(DEFAULT_PROMPT, min_length=1)
    # The largest `/v1/responses/compact` request body accepted (413 past it).
    max_input_bytes: int = Field(1024 * 1024, ge=1024)

    @field_validator("keys")
    @classmethod
    def _unique_ids(cls, keys: list[CompactionKey]) -> list[CompactionKey]:
        ids = [key.id for key in keys]
        if len(ids) != len(set(ids)):
            raise ValueError("key ids must be unique")
        return keys
