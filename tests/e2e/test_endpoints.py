"""The other endpoints: stored responses, models, info, health probes, root_path, CORS."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from tests.support.openai_shapes import validate_response
from tests.support.processes import free_port


def test_get_input_items_delete_own_response(gateway):
    client = gateway.client()
    created = client.responses.create(input="keep me")
    second = client.responses.create(input="and me", previous_response_id=created.id)
    fetched = client.responses.retrieve(second.id)
    assert fetched.id == second.id and fetched.output_text == second.output_text
    raw = gateway.get(f"/v1/responses/{second.id}").json()
    validate_response(raw)
    assert raw["conversation"] == {"id": second.conversation.id}   # the form its turn showed (the SDK's)
    assert raw["previous_response_id"] == created.id  # echoed though the upstream drops it
    items = client.responses.input_items.list(second.id)
    assert [item.type for item in items.data][0] == "message"
    deleted = gateway.delete(f"/v1/responses/{second.id}").json()
    assert deleted == {"id": second.id, "object": "response", "deleted": True}
    assert gateway.get(f"/v1/responses/{second.id}").status == 404
    # The conversation continues from the turn before the deleted one.
    after = client.responses.create(input="after delete", conversation=created.conversation.id)
    assert after.status == "completed"


def test_models_lcore_and_openai_shapes(gateway):
    data = gateway.get("/v1/models").json()
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == [m["identifier"] for m in data["models"]]
    chat = next(m for m in data["models"] if m["identifier"] == "scripted-chat")
    assert chat["type"] == "model" and chat["model_type"] == "llm" and chat["api_model_type"] == "llm"
    assert {"provider_id", "provider_resource_id", "metadata"} <= set(chat)
    llms = gateway.get("/v1/models?model_type=llm").json()
    assert [m["model_type"] for m in llms["models"]] == ["llm"] * len(llms["models"])
    assert "scripted-embed" not in [m["id"] for m in llms["data"]]
    listed = [model.id for model in gateway.client().models.list()]
    assert "scripted-chat" in listed


def test_info(gateway):
    assert gateway.get("/v1/info").json() == {"name": "gateway under test", "service_version": "0.1.0",
                                              "llama_stack_version": "0.7.3"}


def test_health_probes(gateway, gateway_factory):
    assert gateway.get("/liveness").json() == {"alive": True}
    assert gateway.get("/readiness").json() == {"ready": True, "reason": "All providers are healthy",
                                                "overall_status": "healthy", "impacts": None, "providers": []}
    dead = gateway_factory(f"http://127.0.0.1:{free_port()}")
    assert dead.get("/liveness").status == 200
    reply = dead.get("/readiness")
    assert reply.status == 503
    assert reply.json() == {"ready": False, "reason": "Cannot connect to backend service",
                            "overall_status": "unhealthy",
                            "impacts": ["LLM inference unavailable", "Provider health checks unavailable"],
                            "providers": []}


def test_readiness_reports_database_failure(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    assert gateway.get("/readiness").status == 200
    # Another process holds the write lock: the gateway could not record turns.
    holder = sqlite3.connect(gateway.config_path.parent / "gateway.db", timeout=0, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        reply = gateway.get("/readiness")
        assert reply.status == 503
        assert reply.json()["reason"] == "Database unavailable"
        assert reply.json()["impacts"] == ["Conversations and turns cannot be stored"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert gateway.get("/readiness").status == 200


def test_root_path_prefix(gateway_factory, upstream):
    prefixed = gateway_factory(upstream.url, service={"root_path": "/api/lightspeed"})
    assert prefixed.post("/api/lightspeed/v1/responses", {"input": "prefixed"}).status == 200
    assert prefixed.post("/v1/responses", {"input": "unprefixed"}).status == 200
    assert prefixed.get("/api/lightspeed/liveness").status == 200


def test_cors(gateway_factory, upstream):
    cors = gateway_factory(upstream.url, service={"cors": {"allow_origins": ["https://app.example"],
                                                            "allow_credentials": True}})
    reply = cors.request("OPTIONS", "/v1/responses", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert reply.status == 204
    assert reply.headers["access-control-allow-origin"] == "https://app.example"
    assert reply.headers["access-control-allow-credentials"] == "true"
    assert "POST" in reply.headers["access-control-allow-methods"]
    reply = cors.post("/v1/responses", {"input": "cors"}, headers={"Origin": "https://app.example"})
    assert reply.headers["access-control-allow-origin"] == "https://app.example"
    reply = cors.request("OPTIONS", "/v1/responses", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert reply.status == 403 and "access-control-allow-origin" not in reply.headers


def test_request_id_echoed(gateway):
    reply = gateway.post("/v1/responses", {"input": "trace me"}, headers={"X-Request-ID": "abc-123"})
    assert reply.headers["x-request-id"] == "abc-123"
    status, _ = gateway.stream({"input": "trace me"}, headers={"X-Request-ID": "A.b_c-9"})
    assert status == 200
    assert gateway.get("/v1/nope", headers={"X-Request-ID": "x" * 128}).headers["x-request-id"] == "x" * 128


@pytest.mark.parametrize("sent", ["x" * 129, "two words", "a\tb", "<script>", "", "ünïcode"])
def test_unacceptable_request_ids_are_replaced_by_unguessable_ones(gateway, sent):
    given = gateway.get("/v1/models", headers={"X-Request-ID": sent}).headers["x-request-id"]
    again = gateway.get("/v1/models", headers={"X-Request-ID": sent}).headers["x-request-id"]
    assert given != sent and again != given
    assert uuid.UUID(given).version == 4 and uuid.UUID(again).version == 4
