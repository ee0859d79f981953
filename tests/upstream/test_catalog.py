"""What the catalog makes of the upstream's `/v1/models` entries."""

from __future__ import annotations

import pytest

from gateway.upstream.catalog import ModelInfo


@pytest.mark.parametrize("raw, display, provider", [
    # Llama Stack names the provider: LCORE shows a model it chose without it.
    ({"id": "scripted/scripted-chat", "custom_metadata": {"model_type": "llm", "provider_id": "scripted"}},
     "scripted-chat", "scripted"),
    ({"id": "vllm/meta-llama/Llama-3.1-8B", "custom_metadata": {"provider_id": "vllm"}},
     "meta-llama/Llama-3.1-8B", "vllm"),
    # Other servers name no provider: the id is the model's name as it is.
    ({"id": "meta-llama/Llama-3.1-8B", "object": "model"}, "meta-llama/Llama-3.1-8B", "meta-llama"),
    ({"id": "gpt-4o-mini", "object": "model"}, "gpt-4o-mini", None),
])
def test_display_id(raw, display, provider):
    model = ModelInfo.from_upstream(raw)
    assert model.display_id == display and model.provider_id == provider and model.model_type == "llm"
