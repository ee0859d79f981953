"""Conversation state: kept by the upstream's Conversations API (Llama Stack), or by
the gateway when the upstream has none (vLLM, OpenAI-compatible servers), detected on
first use or forced in config; persistence; model selection order."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from tests.support.gateway_db import Counts, GatewayDb


@pytest.fixture
def plain_upstream(upstream_with):
    return upstream_with("--no-conversations")


def test_upstream_without_conversations_api(gateway_factory, plain_upstream):
    gateway = gateway_factory(plain_upstream.url)
    plain_upstream.clear()
    client = gateway.client()
    first = client.responses.create(input="first")
    assert first.conversation.id.startswith("conv_")   # an OpenAI SDK gets the object form
    second = client.responses.create(input="second", conversation=first.conversation.id)
    assert second.output_text == "Scripted reply (turn 2, 3 messages): second"
    sent = plain_upstream.last()["body"]
    assert sent["previous_response_id"] == first.id and "conversation" not in sent
    # Detected once: later new conversations do not probe again.
    plain_upstream.clear()
    client.responses.create(input="another new conversation")
    assert plain_upstream.requests("/v1/conversations") == []
    # A fork in gateway mode is just previous_response_id upstream.
    fork = client.responses.create(input="fork", previous_response_id=first.id)
    assert fork.conversation != first.conversation
    assert fork.output_text == "Scripted reply (turn 2, 3 messages): fork"
    streamed = list(client.responses.create(input="third", conversation=first.conversation.id, stream=True))
    assert streamed[-1].response.output_text.startswith("Scripted reply (turn 3, 5 messages)")


def test_conversation_mode_forced_by_config(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0,
                                                         "conversations": "gateway"})
    upstream.clear()
    first = gateway.client().responses.create(input="kept by the gateway")
    second = gateway.client().responses.create(input="still", conversation=first.conversation)
    assert upstream.requests("/v1/conversations") == []
    assert upstream.last()["body"]["previous_response_id"] == first.id
    assert second.output_text.startswith("Scripted reply (turn 2, 3 messages)")


def test_conversations_forced_upstream(gateway_factory, upstream, upstream_with):
    forced = {"url": upstream.url, "max_retries": 0, "conversations": "upstream"}
    gateway = gateway_factory(upstream.url, llama_stack=forced)
    upstream.clear()
    first = gateway.post("/v1/responses", {"input": "kept upstream"}).ok()
    assert [r["method"] for r in upstream.requests("/v1/conversations")] == ["POST"]  # created there
    assert upstream.last()["body"]["conversation"] == first["conversation"]
    upstream.clear()
    gateway.post("/v1/responses", {"input": "still upstream", "conversation": first["conversation"]}).ok()
    sent = upstream.last()["body"]
    assert sent["conversation"] == first["conversation"] and "previous_response_id" not in sent
    # Forced, not detected: an upstream without a Conversations API is an error, not a
    # silent fallback to conversations kept by the gateway.
    plain = upstream_with("--no-conversations")
    strict = gateway_factory(plain.url, llama_stack={**forced, "url": plain.url})
    plain.clear()
    reply = strict.post("/v1/responses?user_id=forced", {"input": "no conversations api"})
    assert reply.status == 404
    assert [r["path"] for r in plain.requests() if r["method"] == "POST"] == ["/v1/conversations"]
    assert GatewayDb.of(strict).counts() == Counts(conversations=0, turns=0)


def seed_lcore_conversation(gateway, conversation_id: str, user_id: str, upstream_id: str | None) -> None:
    """A conversation row with an LCORE-era UUID id, as a database carried over from LCORE
    holds it (the gateway itself only creates 48-hex ids)."""
    db = sqlite3.connect(GatewayDb.of(gateway).path, timeout=10)
    try:
        with db:
            db.execute("INSERT INTO gateway_conversations (id, user_id, upstream_id, created_at, last_message_at) "
                       "VALUES (?, ?, ?, '2025-01-01T00:00:00+00:00', '2025-01-01T00:00:00+00:00')",
                       (conversation_id, user_id, upstream_id))
    finally:
        db.close()


def test_uuid_conversation_ids(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    db = GatewayDb.of(gateway)
    # A UUID is a valid id: an unknown one is a 404 (not a 422) and creates nothing.
    upstream.clear()
    reply = gateway.post("/v1/responses?user_id=dave", {"input": "hi", "conversation": str(uuid.uuid4())})
    assert reply.status == 404
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []
    # An LCORE conversation with a UUID id continues, in any letter case and as {"id": …}.
    upstream_conversation = upstream.post("/v1/conversations", {"metadata": {}}).ok()["id"]
    legacy = str(uuid.uuid4())
    seed_lcore_conversation(gateway, legacy, "dave", upstream_conversation)
    turns = []
    for form in (legacy.upper(), {"id": legacy}):
        upstream.clear()
        turns.append(gateway.post("/v1/responses?user_id=dave", {"input": "more", "conversation": form}).ok())
        assert upstream.last()["body"]["conversation"] == upstream_conversation
    assert turns[1]["output_text"] == "Scripted reply (turn 2, 3 messages): more"
    assert [db.wait_for_turn(t["id"])["conversation_id"] for t in turns] == [legacy, legacy]
    assert db.conversation(legacy)["last_response_id"] == turns[1]["id"]
    # It still belongs to its owner.
    upstream.clear()
    reply = gateway.post("/v1/responses?user_id=erin", {"input": "mine?", "conversation": legacy})
    assert reply.status == 403
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []


def test_uuid_conversation_id_returned_is_accepted_back(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    legacy = str(uuid.uuid4())
    seed_lcore_conversation(gateway, legacy, "dave", upstream.post("/v1/conversations", {"metadata": {}}).ok()["id"])
    first = gateway.post("/v1/responses?user_id=dave", {"input": "one", "conversation": legacy}).ok()
    assert first["conversation"] == legacy  # not conv_<uuid>, which LCORE itself refuses
    again = gateway.post("/v1/responses?user_id=dave", {"input": "two", "conversation": first["conversation"]})
    assert again.status == 200, again.body


def test_persistence_records_owner_turns_and_model(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    first = gateway.post("/v1/responses?user_id=carol", {"input": "one", "generate_topic_summary": False}).ok()
    second = gateway.post("/v1/responses?user_id=carol", {"input": "two", "conversation": first["conversation"]}).ok()
    db = GatewayDb.of(gateway)
    # Persistence runs after the response is written (it never delays the client).
    turns = [db.wait_for_turn(first["id"]), db.wait_for_turn(second["id"])]
    assert db.counts() == Counts(conversations=1, turns=2)
    conv = db.conversation(first["conversation"])
    assert conv is not None and conv["id"] == first["conversation"][5:] and conv["upstream_id"] == first["conversation"]
    assert conv["user_id"] == "carol" and conv["message_count"] == 2
    assert conv["last_response_id"] == second["id"] and conv["last_used_model"] == "scripted-chat"
    assert conv["topic_summary"] == "" and conv["generate_topic_summary"] == 0
    assert [(t["turn_number"], t["conversation_id"]) for t in turns] == [(1, conv["id"]), (2, conv["id"])]
    assert all(t["model"] == "scripted-chat" and t["status"] == "completed" for t in turns)
    assert turns[0]["started_at"] <= turns[0]["completed_at"]


def test_persistence_survives_restart(gateway_factory, upstream, tmp_path):
    gateway = gateway_factory(upstream.url)
    first = gateway.post("/v1/responses", {"input": "before restart"}).ok()
    gateway.stop()
    from tests.support.gateway_proc import start_gateway
    import yaml
    restarted = start_gateway(tmp_path / "restart", yaml.safe_load(gateway.config_path.read_text()))
    try:
        reply = restarted.post("/v1/responses", {"input": "after restart", "conversation": first["conversation"]})
        assert reply.status == 200
        assert reply.json()["output_text"].startswith("Scripted reply (turn 2, 3 messages)")
    finally:
        restarted.stop()


def model_sent(gateway, upstream, body: dict) -> str:
    """The model the upstream was asked for by this (successful) request."""
    upstream.clear()
    gateway.post("/v1/responses", body).ok()
    return upstream.last()["body"]["model"]


def test_model_selection_order(gateway_factory, upstream):
    configured = gateway_factory(upstream.url, inference={"default_provider": "scripted",
                                                          "default_model": "scripted-mini"})
    # The configured default (provider/model) resolves to the upstream's model id.
    upstream.clear()
    first = configured.post("/v1/responses", {"input": "default model"}).ok()
    assert upstream.last()["body"]["model"] == "scripted-mini"
    # An explicit model wins over the default; the conversation then remembers it.
    assert model_sent(configured, upstream, {"input": "x", "model": "scripted-chat",
                                             "conversation": first["conversation"]}) == "scripted-chat"
    assert model_sent(configured, upstream, {"input": "y", "conversation": first["conversation"]}) == "scripted-chat"
    # A new conversation falls back to the default again.
    assert model_sent(configured, upstream, {"input": "z"}) == "scripted-mini"
    # A configured default the upstream does not list is a 404 that leaves nothing behind.
    missing = gateway_factory(upstream.url, inference={"default_provider": "nowhere", "default_model": "gone"})
    upstream.clear()
    reply = missing.post("/v1/responses?user_id=no-default", {"input": "no default"})
    assert reply.status == 404
    assert [r["path"] for r in upstream.requests() if r["method"] != "GET"] == []
    db = GatewayDb.of(missing)
    db.flush(model="scripted-chat")
    assert db.counts(user_id="no-default") == Counts(conversations=0, turns=0)


def test_first_llm_when_nothing_configured(gateway, upstream):
    # The first `llm` in the upstream's /v1/models order (it lists scripted-mini last).
    listed = [m["id"] for m in upstream.get("/v1/models").json()["data"]]
    assert listed == ["scripted-chat", "scripted-embed", "scripted-mini"]
    assert model_sent(gateway, upstream, {"input": "pick for me"}) == "scripted-chat"


def test_approval_answer_is_chained_then_appended(gateway, upstream):
    tools = [{"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:9/mcp",
              "require_approval": "always"}]
    first = gateway.post("/v1/responses", {"input": "Use the add tool to add two numbers", "tools": tools}).ok()
    request = first["output"][-1]
    assert request["type"] == "mcp_approval_request"
    upstream.clear()
    answer = [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}]
    second = gateway.post("/v1/responses", {"previous_response_id": first["id"], "tools": tools, "input": answer}).ok()
    assert [item["type"] for item in second["output"]][-2:] == ["mcp_call", "message"]
    assert second["conversation"] == first["conversation"]
    sent = upstream.last()["body"]
    # Llama Stack only finds the approval request in the previous response.
    assert sent["previous_response_id"] == first["id"] and "conversation" not in sent
    # Appended before the answer was sent (no waiting): any replica continues from it.
    path = f"/v1/conversations/{first['conversation']}/items"
    appended = [item for r in upstream.requests(path) for item in r["body"]["items"]]
    assert [item["type"] for item in appended] == ["mcp_approval_response"] + [i["type"] for i in second["output"]]
    # The next turn goes back to `conversation`, which now holds the approved call.
    upstream.clear()
    third = gateway.post("/v1/responses", {"input": "thanks", "conversation": first["conversation"]}).ok()
    assert third["status"] == "completed"
    assert upstream.last()["body"]["conversation"] == first["conversation"]
