"""`GET /v1/models`'s one body for two audiences: OpenAI's model objects under `data`
and LCORE's under `models`, from one upstream model.
(The endpoints through `gateway serve`: tests/e2e/test_endpoints.py.)"""

from __future__ import annotations

from gateway.http.catalog import _lcore_model, _openai_model
from gateway.upstream.catalog import ModelInfo

LLAMA = {"identifier": "openai/gpt-4o-mini", "provider_resource_id": "gpt-4o-mini", "provider_id": "openai",
         "model_type": "llm", "custom_metadata": {"model_type": "llm", "provider_id": "openai",
                                                  "provider_resource_id": "gpt-4o-mini", "context": 128000}}
VLLM = {"id": "meta-llama/Llama-3.1-8B", "object": "model", "created": 1700000000, "owned_by": "vllm"}


def test_lcores_model_keeps_the_metadata_the_other_keys_do_not_repeat():
    assert _lcore_model(ModelInfo.from_upstream(LLAMA)) == {
        "identifier": "openai/gpt-4o-mini", "metadata": {"context": 128000}, "api_model_type": "llm",
        "provider_id": "openai", "type": "model", "provider_resource_id": "gpt-4o-mini", "model_type": "llm"}
    # A server without Llama Stack's fields: the id stands in for the resource id.
    plain = _lcore_model(ModelInfo.from_upstream(VLLM))
    assert plain["provider_resource_id"] == "meta-llama/Llama-3.1-8B" and plain["metadata"] == {}


def test_openais_model_is_the_upstreams_with_defaults_and_the_id_last():
    assert _openai_model(ModelInfo.from_upstream(VLLM)) == VLLM   # what an OpenAI server gave, as it was
    shown = _openai_model(ModelInfo.from_upstream(LLAMA))
    assert (shown["id"], shown["object"], shown["created"], shown["owned_by"]) == \
        ("openai/gpt-4o-mini", "model", 0, "openai")

