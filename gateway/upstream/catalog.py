"""The upstream's model catalog (`GET /v1/models`), cached and refreshed.

Llama Stack puts the model type in `custom_metadata.model_type`; other OpenAI-compatible
servers list only chat models and carry no type, so an untyped model counts as an LLM.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.upstream.client import UpstreamClient

# A model we do not know triggers a refresh, at most this often, so a client cannot
# turn every request into a catalog fetch.
_MISS_REFRESH_SECONDS = 5.0


@dataclass(frozen=True)
class ModelInfo:
    id: str
    model_type: str
    provider_id: str | None
    provider_resource_id: str | None
    raw: dict[str, Any] = field(compare=False, repr=False)
    # The id as LCORE shows a model it chose: without the `<provider>/` prefix, when the
    # upstream names a provider (Llama Stack). Other servers' ids are names as they are
    # (`meta-llama/Llama-3.1-8B` on vLLM has no provider prefix to strip).
    display_id: str = ""

    @classmethod
    def from_upstream(cls, raw: dict[str, Any]) -> "ModelInfo":
        meta = raw.get("custom_metadata") or raw.get("metadata") or {}
        model_id = str(raw.get("id") or raw.get("identifier"))
        declared = meta.get("provider_id") or raw.get("provider_id")
        provider = declared
        if provider is None and "/" in model_id:
            provider = model_id.split("/", 1)[0]
        shown = model_id[len(declared) + 1:] if declared and model_id.startswith(f"{declared}/") else model_id
        return cls(id=model_id, model_type=str(meta.get("model_type") or raw.get("model_type") or "llm"),
                   provider_id=provider,
                   provider_resource_id=meta.get("provider_resource_id") or raw.get("provider_resource_id"),
                   raw=raw, display_id=shown)


class ModelCatalog:
    def __init__(self, client: UpstreamClient, ttl: float):
        self._client = client
        self._ttl = ttl
        self._models: list[ModelInfo] | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()

    async def models(self) -> list[ModelInfo]:
        if self._models is None or time.monotonic() - self._fetched_at > self._ttl:
            await self._refresh()
        assert self._models is not None
        return self._models

    async def fresh(self) -> list[ModelInfo]:
        """The upstream's list now (503 when it is unreachable, whatever is cached)."""
        await self._refresh()
        assert self._models is not None
        return self._models

    async def find(self, model_id: str) -> ModelInfo | None:
        for model in await self.models():
            if model.id == model_id:
                return model
        if time.monotonic() - self._fetched_at > _MISS_REFRESH_SECONDS:
            await self._refresh()
            return next((model for model in self._models or [] if model.id == model_id), None)
        return None

    async def first_llm(self) -> ModelInfo | None:
        return next((model for model in await self.models() if model.model_type == "llm"), None)

    async def _refresh(self) -> None:
        async with self._lock:
            fetched_at = time.monotonic()
            reply = await self._client.request("GET", "/v1/models")
            if not reply.ok:
                raise self._client.error(reply.status, reply.body)
            data = reply.json()
            entries: Any = data.get("data", data.get("models", [])) if isinstance(data, dict) else data
            self._models = [ModelInfo.from_upstream(entry) for entry in entries if isinstance(entry, dict)]
            self._fetched_at = fetched_at
