"""Which model a turn runs on (spec 001): the request's → the conversation's last model
→ the configured default → the upstream's first LLM. Naming a model needs the
`model_override` action, unless it is the one that would be chosen anyway (OpenAI SDK
clients always send `model`)."""

from __future__ import annotations

from gateway.config import InferenceConfig
from gateway.config.access import Action
from gateway.identity import Identity
from gateway.schema.errors import ApiError, model_not_found, model_override_forbidden
from gateway.storage.conversations import ConversationRecord
from gateway.upstream.catalog import ModelCatalog, ModelInfo


class ModelSelector:
    def __init__(self, catalog: ModelCatalog, inference: InferenceConfig):
        self._catalog = catalog
        self._inference = inference

    async def select(self, identity: Identity, named: str | None, existing: ConversationRecord | None) -> ModelInfo:
        if named:
            model = await self._catalog.find(named)
            if Action.MODEL_OVERRIDE not in identity.actions and (
                    model is None or model.id != await self._automatic_id(existing)):
                raise model_override_forbidden()
            if model is None:
                raise model_not_found(named)
            return model
        return await self.automatic(existing)

    async def _automatic_id(self, existing: ConversationRecord | None) -> str | None:
        try:
            return (await self.automatic(existing)).id
        except ApiError:  # no model would be chosen: any named one is an override
            return None

    async def automatic(self, existing: ConversationRecord | None) -> ModelInfo:
        if existing is not None and existing.last_used_model:
            model = await self._catalog.find(existing.last_used_model)
            if model is not None:
                return model
        inference = self._inference
        if inference.default_model_id:
            model = (await self._catalog.find(inference.default_model_id)
                     or await self._catalog.find(inference.default_model or ""))
            if model is None:
                raise model_not_found(inference.default_model_id)
            return model
        model = await self._catalog.first_llm()
        if model is None:
            raise model_not_found(None)
        return model
