"""LCORE's `/v2/conversations` through `gateway serve` (issue 22; lcore.md 4.3, 9):
`conversation_cache` turns it on (500 without it), it is served from the gateway's own
turn store, so it works with the upstream down, and another user's id is a 404."""

from __future__ import annotations

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_proc import start_upstream

CACHE = {"type": "sqlite", "sqlite": {"db_path": "/tmp/unused-by-the-gateway.db"}}
UNKNOWN = "0" * 48


def test_without_a_conversation_cache_v2_is_lcores_500(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    for method, path in (("GET", "/v2/conversations"), ("GET", f"/v2/conversations/{UNKNOWN}"),
                         ("DELETE", f"/v2/conversations/{UNKNOWN}")):
        reply = gateway.request(method, path)
        assert reply.status == 500 and reply.json()["detail"] == {
            "response": "Conversation cache not configured",
            "cause": "Conversation cache is not configured or unavailable."}
    # A malformed id is refused first, as LCORE checks it before the cache.
    assert gateway.get("/v2/conversations/abcdef").status == 400


@pytest.mark.parametrize("engine", [False, True], ids=["forward", "engine"])
def test_v2_from_the_gateways_store_with_the_upstream_down(engine, gateway_factory, tmp_path):
    dying = start_upstream(tmp_path, *(("--no-responses",) if engine else ()))
    gateway = gateway_factory(dying.url, conversation_cache=CACHE, **(engine_config(dying.url) if engine else {}))
    first = gateway.post("/v1/responses?user_id=ann", {"input": "hello v2"}).ok()
    cid = first["conversation"].removeprefix("conv_")
    gateway.post("/v1/responses?user_id=ann", {"input": "second", "conversation": first["conversation"]}).ok()
    dying.stop()

    listed = gateway.get("/v2/conversations?user_id=ann").ok()["conversations"]
    assert [set(item) for item in listed] == [{"conversation_id", "topic_summary", "last_message_timestamp"}]
    assert listed[0]["conversation_id"] == cid and isinstance(listed[0]["last_message_timestamp"], float)
    got = gateway.get(f"/v2/conversations/{cid}?user_id=ann").ok()
    assert got["conversation_id"] == cid and [turn["messages"][0]["content"] for turn in got["chat_history"]] == [
        "hello v2", "second"]
    assert got["chat_history"][0]["messages"][1]["content"] == first["output_text"]
    renamed = gateway.request("PUT", f"/v2/conversations/{first['conversation']}?user_id=ann",
                              {"topic_summary": "Renamed"}).ok()
    assert renamed["message"] == "Topic summary updated successfully"
    assert gateway.get("/v2/conversations?user_id=ann").ok()["conversations"][0]["topic_summary"] == "Renamed"
    assert gateway.request("PUT", f"/v2/conversations/{cid}?user_id=ann", {"topic_summary": ""}).status == 422

    # Another user's: unknown to v2 (no 403), and theirs to delete only.
    not_found = {"response": "Conversation not found", "cause": f"Conversation with ID {cid} does not exist"}
    assert gateway.get("/v2/conversations?user_id=ben").ok() == {"conversations": []}
    for method, body in (("GET", None), ("PUT", {"topic_summary": "mine now"})):
        reply = gateway.request(method, f"/v2/conversations/{cid}?user_id=ben", body)
        assert reply.status == 404 and reply.json()["detail"] == not_found
    assert gateway.delete(f"/v2/conversations/{cid}?user_id=ben").ok()["deleted"] is False
    assert gateway.get(f"/v2/conversations/{UNKNOWN}?user_id=ann").status == 404
    assert gateway.get("/v2/conversations/abcdef?user_id=ann").json()["detail"] == {
        "response": "Invalid conversation ID format", "cause": "The conversation ID abcdef has invalid format."}

    assert gateway.delete(f"/v2/conversations/{cid}?user_id=ann").ok() == {
        "conversation_id": cid, "deleted": True, "response": "Conversation deleted successfully", "success": True}
    assert gateway.get(f"/v2/conversations/{cid}?user_id=ann").status == 404
    assert gateway.get(f"/v1/conversations/{cid}?user_id=ann").status == 404   # gone for v1 too
