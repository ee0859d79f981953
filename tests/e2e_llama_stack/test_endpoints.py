"""The gateway's read-only endpoints with a real Llama Stack 0.7.3 behind it."""

from __future__ import annotations

import pytest

from .conftest import CHAT_MODEL

pytestmark = pytest.mark.llama_stack


def test_models_from_llama_stack(gw, stack):
    upstream_ids = [model["id"] for model in stack.get("/v1/models")["data"]]
    data = gw.get("/v1/models").json()
    assert [model["id"] for model in data["data"]] == upstream_ids
    assert [model["identifier"] for model in data["models"]] == upstream_ids
    chat = next(model for model in data["models"] if model["identifier"] == CHAT_MODEL)
    assert chat["model_type"] == "llm" and chat["api_model_type"] == "llm"
    assert chat["provider_id"] == "scripted" and chat["provider_resource_id"] == "scripted-chat"
    llms = gw.get("/v1/models?model_type=llm").json()
    assert CHAT_MODEL in [model["id"] for model in llms["data"]]
    assert "scripted/scripted-embed" not in [model["id"] for model in llms["data"]]
    assert CHAT_MODEL in [model.id for model in gw.client().models.list()]


def test_info_and_probes(gw):
    assert gw.get("/v1/info").json() == {"name": "gateway under test", "service_version": "0.1.0",
                                         "llama_stack_version": "0.7.3"}
    assert gw.get("/liveness").json() == {"alive": True}
    reply = gw.get("/readiness")
    assert reply.status == 200 and reply.json()["ready"] is True
