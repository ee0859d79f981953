"""Which model a turn runs on: the request's, else the conversation's last, else the
configured default, else the upstream's first LLM; naming a model needs `model_override`
unless it is the one that would be chosen anyway."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import InferenceConfig
from gateway.config.access import Action
from gateway.identity import DEFAULT_ACTIONS, Identity
from gateway.schema.errors import ApiError
from gateway.storage.conversations import ConversationRecord
from gateway.turns.model import ModelSelector
from gateway.upstream.catalog import ModelInfo


def model(id: str, kind: str = "llm") -> ModelInfo:
    return ModelInfo(id=id, model_type=kind, provider_id=id.split("/")[0], provider_resource_id=id, raw={})


class Catalog:
    def __init__(self, *models: ModelInfo):
        self.models = list(models)

    async def find(self, model_id: str) -> ModelInfo | None:
        return next((m for m in self.models if m.id == model_id), None)

    async def first_llm(self) -> ModelInfo | None:
        return next((m for m in self.models if m.model_type == "llm"), None)


EMBED, FIRST, OTHER, DEFAULT = (model("p/embed", "embedding"), model("p/first"), model("p/other"),
                                model("q/default"))
CATALOG = Catalog(EMBED, FIRST, OTHER, DEFAULT)
PLAIN = Identity(user_id="u", username="u", actions=DEFAULT_ACTIONS - {Action.MODEL_OVERRIDE})
OVERRIDER = Identity(user_id="u", username="u", actions=DEFAULT_ACTIONS | {Action.MODEL_OVERRIDE})


def selector(catalog: Any = CATALOG, **inference: Any) -> ModelSelector:
    return ModelSelector(catalog, InferenceConfig.model_validate(inference))


def conversation(last_model: str | None) -> ConversationRecord:
    return ConversationRecord(id="c", user_id="u", upstream_id=None, created_at="", last_message_at="",
                              last_used_model=last_model, last_used_provider=None, last_response_id=None,
                              message_count=1, topic_summary="", generate_topic_summary=False)


async def test_the_automatic_choice_in_order():
    assert await selector().automatic(None) is FIRST   # the first LLM, not the embedding model
    configured = selector(default_provider="q", default_model="default")
    assert await configured.automatic(None) is DEFAULT
    assert await configured.automatic(conversation("p/other")) is OTHER
    # A conversation's model the upstream no longer has: the next rule decides.
    assert await configured.automatic(conversation("p/gone")) is DEFAULT


async def test_a_default_the_upstream_lacks_or_no_llm_is_model_not_found():
    with pytest.raises(ApiError) as missing:
        await selector(default_provider="q", default_model="gone").automatic(None)
    assert missing.value.status == 404 and missing.value.code == "model_not_found"
    assert "gone" in missing.value.cause and "q/gone" not in missing.value.cause   # LCORE drops the provider
    with pytest.raises(ApiError) as none:
        await selector(Catalog(EMBED)).automatic(None)
    assert none.value.status == 404


async def test_naming_a_model_needs_model_override_unless_it_would_be_chosen():
    assert await selector().select(PLAIN, "p/first", None) is FIRST   # what the SDKs always send
    assert await selector().select(PLAIN, None, None) is FIRST
    with pytest.raises(ApiError) as refused:
        await selector().select(PLAIN, "p/other", None)
    assert refused.value.status == 403 and refused.value.code == "model_override_forbidden"
    # The conversation's model is the one that would be chosen: naming it is no override.
    assert await selector().select(PLAIN, "p/other", conversation("p/other")) is OTHER
    assert await selector().select(OVERRIDER, "p/other", None) is OTHER


async def test_an_unknown_named_model_is_403_without_override_and_404_with_it():
    # Without the action the caller learns nothing about which models exist.
    with pytest.raises(ApiError) as plain:
        await selector().select(PLAIN, "p/nope", None)
    assert plain.value.status == 403
    with pytest.raises(ApiError) as overrider:
        await selector().select(OVERRIDER, "p/nope", None)
    assert overrider.value.status == 404
    # No model would be chosen at all: any named one is an override.
    with pytest.raises(ApiError) as nothing:
        await selector(Catalog(EMBED)).select(PLAIN, "p/embed", None)
    assert nothing.value.status == 403
