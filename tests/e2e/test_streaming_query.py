"""LCORE's `POST /v1/streaming_query` through `gateway serve`, in both modes (forward in
front of the scripted Responses upstream; the local engine in front of its Chat
Completions, with a real MCP server and vector store): LCORE's framing, tokens that add
up to `turn_complete`, tool calls and results, `text/plain`, and how a turn that does
not end well ends (LCORE main)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gateway_db import GatewayDb
from tests.support.mcp_server import running_mcp_server
from tests.support.vector_store import start_vector_store

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lcore"
SEARCH = "search the handbook with file_search for the Falcon launch code"
LIMITS = [{"name": "daily", "type": "user_limiter", "initial_quota": 100000, "quota_increase": 0,
           "period": "1 day"}]


def frames(body: bytes) -> list[dict]:
    """Every block is one `data:` line of `{"event", "data"}` (no `event:` line, no [DONE])."""
    out = []
    for block in body.decode().split("\n\n"):
        if block:
            assert block.startswith("data: ") and "\n" not in block, block
            out.append(json.loads(block[6:]))
    return out


def names(events: list[dict]) -> list[str]:
    return [event["event"] for event in events]


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-legacy")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    server = start_vector_store(tmp_path_factory.mktemp("vector-store-legacy"))
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["forward", "engine"])
def mode(request, gateway_factory, upstream, chat_upstream, mcp, stores, tmp_path_factory):
    """(gateway, its upstream, the upstream path a turn goes to, the mode)."""
    quota = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("legacy-quota") / "q.db")}, "limiters": LIMITS}
    if request.param == "forward":
        gateway = gateway_factory(upstream.url, mcp_servers=[{"name": "calc", "url": mcp.url}],
                                  byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"}],
                                  quota_handlers=quota)
        return gateway, upstream, "/v1/responses", "forward"
    gateway = gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                              "api": "chat_completions"},
                              mcp_servers=[{"name": "calc", "url": mcp.url}],
                              byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_manuals",
                                         "search_url": stores.url}], quota_handlers=quota)
    return gateway, chat_upstream, "/v1/chat/completions", "engine"


def stream(gateway, body, user="sam"):
    reply = gateway.post(f"/v1/streaming_query?user_id={user}", body)
    assert reply.status == 200, reply.body
    return reply


def test_lcores_framing_and_tokens_that_add_up(mode):
    gateway, _, _, _ = mode
    reply = stream(gateway, {"query": "hello there, say hi", "no_tools": True})
    assert reply.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = frames(reply.body)
    captured = frames((FIXTURES / "streaming_query.sse").read_bytes())
    assert names(events)[0] == "start" and names(events)[-2:] == ["turn_complete", "end"]
    assert set(names(events)) == set(names(captured))
    start = events[0]["data"]
    assert set(start) == {"conversation_id", "request_id"} and len(start["conversation_id"]) == 48
    tokens = [event["data"] for event in events if event["event"] == "token"]
    assert [token["id"] for token in tokens] == list(range(len(tokens)))
    complete = events[-2]["data"]
    assert complete["id"] == len(tokens) and "".join(t["token"] for t in tokens) == complete["token"]
    assert complete["token"] == "Scripted reply (turn 1, 1 messages): hello there, say hi"
    end = events[-1]
    assert set(end) == {"event", "data", "available_quotas"} and end["available_quotas"]["daily"] < 100000
    assert set(end["data"]) == set(captured[-1]["data"]) and end["data"]["truncated"] is None
    assert end["data"]["input_tokens"] > 0 and end["data"]["output_tokens"] > 0
    # The conversation goes on, by its bare id.
    again = frames(stream(gateway, {"query": "more", "no_tools": True,
                                    "conversation_id": start["conversation_id"]}).body)
    assert again[0]["data"]["conversation_id"] == start["conversation_id"]
    assert again[-2]["data"]["token"].startswith("Scripted reply (turn 2, 3 messages)")


def test_text_plain_is_the_text_only(mode):
    gateway, _, _, _ = mode
    reply = stream(gateway, {"query": "hello there, say hi", "no_tools": True, "media_type": "text/plain"})
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.body.decode() == "Scripted reply (turn 1, 1 messages): hello there, say hi"


def test_a_file_search_is_a_tool_call_a_result_and_a_referenced_document(mode):
    gateway, _, _, _ = mode
    events = frames(stream(gateway, {"query": SEARCH, "vector_store_ids": ["handbook"]}).body)
    call = next(event["data"] for event in events if event["event"] == "tool_call"
                and event["data"]["type"] == "file_search_call")
    result = next(event["data"] for event in events if event["event"] == "tool_result"
                  and event["data"]["id"] == call["id"])
    assert call["name"] == "file_search" and call["type"] == "file_search_call" and call["args"]["queries"]
    assert result["type"] == "file_search_call" and result["round"] >= 1
    assert "results" in json.loads(result["content"]), result
    assert events[-1]["event"] == "end" and events[-1]["data"]["referenced_documents"], result
    tokens = "".join(event["data"]["token"] for event in events if event["event"] == "token")
    assert tokens == events[-2]["data"]["token"]
    # The same as JSON.
    body = gateway.post("/v1/query?user_id=sam", {"query": SEARCH, "vector_store_ids": ["handbook"]}).ok()
    searched = [call for call in body["tool_calls"] if call["type"] == "file_search_call"]
    assert searched[0]["name"] == "file_search" and body["rag_chunks"] and body["referenced_documents"]
    assert [result["round"] for result in body["tool_results"]] == list(range(1, len(body["tool_results"]) + 1))


def test_an_mcp_call_is_a_tool_call_and_a_result(mode):
    gateway, _, _, _ = mode
    events = frames(stream(gateway, {"query": "please add 2 and 3"}).body)
    calls = [event["data"] for event in events if event["event"] == "tool_call"]
    results = [event["data"] for event in events if event["event"] == "tool_result"]
    add = next(call for call in calls if call["type"] == "mcp_call")
    assert add["name"] == "add" and add["args"]["server_label"] == "calc"
    done = next(result for result in results if result["id"] == add["id"])
    assert done["status"] == "success" and done["type"] == "mcp_call"
    assert names(events)[-2:] == ["turn_complete", "end"]
    plain = stream(gateway, {"query": "please add 2 and 3", "media_type": "text/plain"}).body.decode()
    assert "[Tool Call: add]\n" in plain and "[Tool Result]\n" in plain


def test_a_failure_mid_stream_is_an_error_and_no_end(mode):
    gateway, _, _, name = mode
    trigger = "error-event" if name == "engine" else "fail-upstream"
    events = frames(stream(gateway, {"query": f"please {trigger} now", "no_tools": True}).body)
    assert names(events)[0] == "start" and names(events)[-1] == "error" and "end" not in names(events)
    error = events[-1]["data"]
    assert set(error) == {"status_code", "response", "cause"} and error["status_code"] == 500
    assert error["response"] == "Error while processing query"
    plain = stream(gateway, {"query": f"please {trigger} now", "no_tools": True, "media_type": "text/plain"})
    assert plain.body.decode().endswith("Status: 500 - Error while processing query - " + error["cause"])


def test_a_length_stop_ends_with_turn_complete_error_end_charged_and_stored(mode):
    gateway, _, _, _ = mode
    events = frames(stream(gateway, {"query": "go on finish-length", "no_tools": True}, user="long").body)
    assert names(events)[-3:] == ["turn_complete", "error", "end"]
    assert events[-2]["data"]["status_code"] == 413 and events[-2]["data"]["response"] == "Prompt is too long"
    assert events[-1]["available_quotas"]["daily"] < 100000
    conversation = events[0]["data"]["conversation_id"]
    db = GatewayDb.of(gateway)
    db.flush()
    assert db.counts(user_id="long").turns == 1
    later = frames(stream(gateway, {"query": "then", "no_tools": True, "conversation_id": conversation},
                          user="long").body)
    assert later[-2]["data"]["token"].startswith("Scripted reply (turn 2, 3 messages)")
    filtered = frames(stream(gateway, {"query": "go on content-filter", "no_tools": True}).body)
    assert names(filtered)[-3:] == ["turn_complete", "error", "end"]
    assert filtered[-2]["data"] == {"status_code": 500, "response": "Error while processing query",
                                    "cause": "The model refused to generate a response due to content policy."}


def test_a_context_overflow_mid_stream_is_prompt_too_long(mode):
    gateway, _, _, name = mode
    reply = gateway.post("/v1/streaming_query?user_id=sam", {"query": "please context-overflow now", "no_tools": True})
    # As LCORE's e2e asserts (200, then an `error` event) where the upstream fails the
    # stream; a Chat Completions upstream refuses the request at once: an HTTP error.
    assert (reply.status == 200) == (name == "forward"), reply.body
    if reply.status != 200:   # refused before the stream began: an HTTP error
        assert reply.status == 413 and reply.json()["detail"]["response"] == "Prompt is too long"
        return
    events = frames(reply.body)
    assert events[-1]["event"] == "error" and events[-1]["data"]["response"] == "Prompt is too long"
