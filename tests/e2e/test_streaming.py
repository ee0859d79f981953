"""Streams through `gateway serve`: upstream quirks repaired, failures after the first
byte ending as `response.failed` + `[DONE]`, and a client that leaves cancelling the
upstream at once while a finished turn is still recorded."""

from __future__ import annotations

import time

import pytest

from tests.support.gateway_db import GatewayDb
from tests.support.processes import free_port
from tests.support.raw_client import bigger_than_socket_buffers, first_event, open_stream, read_until, reset, wait_until
from tests.support.flows import WEATHER_TOOL, checked, kinds
from tests.support.openai_shapes import replay_through_sdk

def test_text_stream_gains_output_text_done(gateway):
    status, frames = gateway.stream({"input": "Tell me something"})
    assert status == 200
    events = checked(frames)
    assert kinds(events)[-4:] == ["output_text.done", "content_part.done", "output_item.done", "completed"]
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["text"] == "Scripted reply (turn 1, 1 messages): Tell me something"
    assert replay_through_sdk(events).output_text == done["text"]


def test_function_call_stream(gateway):
    status, frames = gateway.stream({"input": "Weather in Rome? Use the tool.", "tools": [WEATHER_TOOL]})
    events = checked(frames)
    assert "function_call_arguments.delta" in kinds(events)
    final = replay_through_sdk(events)
    assert final.output[0].type == "function_call" and final.output[0].name == "get_weather"


def test_mcp_stream_arguments_mapped_and_progress_completed(gateway):
    tools = [{"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:9/mcp"}]
    status, frames = gateway.stream({"input": "Use the add tool to add two numbers", "tools": tools})
    events = checked(frames)
    names = kinds(events)
    # Llama Stack streams the arguments before the item, as function-call events, and
    # misnames their end; clients see OpenAI's MCP events after the item is announced.
    assert "function_call_arguments.delta" not in names and "mcp_call.arguments.done" not in names
    added = names.index("output_item.added", names.index("mcp_list_tools.completed"))
    assert names[added + 1:added + 3] == ["mcp_call_arguments.delta", "mcp_call_arguments.done"]
    assert names.index("mcp_list_tools.in_progress") > names.index("output_item.added")
    for event in events:
        if event["type"].startswith(("response.mcp_call", "response.mcp_list_tools")):
            assert event["item_id"] and isinstance(event["output_index"], int)
    final = replay_through_sdk(events)
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]


def test_mcp_approval_stream_drops_orphan_arguments(gateway):
    tools = [{"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:9/mcp",
              "require_approval": "always"}]
    status, frames = gateway.stream({"input": "Use the add tool to add two numbers", "tools": tools})
    events = checked(frames)
    assert not any("arguments" in kind for kind in kinds(events))
    assert replay_through_sdk(events).output[-1].type == "mcp_approval_request"


def test_file_search_stream(gateway_factory, upstream):
    rag = gateway_factory(upstream.url, byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"}])
    tools = [{"type": "file_search", "vector_store_ids": ["vs_handbook"]}]
    status, frames = rag.stream({"input": "search the handbook for the launch code", "tools": tools})
    events = checked(frames)
    assert not any("arguments" in kind for kind in kinds(events))
    added = next(e for e in events if e["type"] == "response.output_item.added"
                 and e["item"]["type"] == "file_search_call")
    assert added["item"]["queries"] == ["search the handbook for the launch code"]
    assert replay_through_sdk(events).output[0].type == "file_search_call"


@pytest.mark.parametrize("trigger, message", [
    ("fail-upstream", "scripted upstream failure"),
    ("error-event", "scripted error event"),
    ("break-stream", "ended without a terminal event"),
])
def test_failures_after_first_byte_end_with_failed_and_done(gateway, trigger, message):
    status, frames = gateway.stream({"input": f"please {trigger}"})
    assert status == 200
    events = checked(frames)
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "server_error"
    assert message in failed["response"]["error"]["message"]
    assert failed["response"]["conversation"] == events[0]["response"]["conversation"]
    assert failed["response"]["available_quotas"] == {}
    # The conversation the client was told about is usable afterwards.
    again = gateway.post("/v1/responses", {"input": "retry", "conversation": failed["response"]["conversation"]})
    assert again.status == 200


def test_idle_timeout_mid_stream(gateway_factory, upstream):
    impatient = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "timeout": 1})
    started = time.monotonic()
    status, frames = impatient.stream({"input": "please stall-stream"})
    assert status == 200 and time.monotonic() - started < 10
    events = checked(frames)
    assert kinds(events) == ["created", "in_progress", "failed"]
    assert "idle timeout" in events[-1]["response"]["error"]["message"]


def test_upstream_error_before_first_byte_is_http_error(gateway, gateway_factory, upstream):
    first = gateway.post("/v1/responses", {"input": "one"}).json()
    gateway.post("/v1/responses", {"input": "two", "conversation": first["conversation"]})
    upstream.delete(f"/v1/responses/{first['id']}")
    reply = gateway.post("/v1/responses", {"input": "fork", "previous_response_id": first["id"], "stream": True})
    assert reply.status == 404 and reply.headers["content-type"].startswith("application/json")
    assert reply.json()["error"]["code"] == "upstream_not_found"
    dead = gateway_factory(f"http://127.0.0.1:{free_port()}")
    reply = dead.post("/v1/responses", {"input": "hi", "stream": True})
    assert reply.status == 503 and reply.json()["detail"]["response"] == "Unable to connect to Llama Stack"


def test_client_disconnect_cancels_upstream_at_once(gateway, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier tests' upstream streams to end")
    sock = open_stream(gateway.direct_port, {"input": "please stall-stream"})
    assert read_until(sock, b"response.in_progress")[1]
    assert upstream.open_streams() == 1  # stalled: it ends only when its client goes away
    sock.close()
    # The gateway's idle timeout (30 s) would close it too: fail well before that.
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be cancelled", timeout=10)


def test_turn_recorded_when_client_leaves_before_the_end_of_the_stream(gateway_factory, upstream):
    # The gateway writes the terminal event and [DONE] in one write once the upstream's
    # terminal event arrived. A reply larger than the sockets can buffer keeps that write
    # pending: the client sees the terminal event begin, then goes away (a reset, unread
    # data left behind) while the gateway is still writing, and never gets [DONE].
    size = bigger_than_socket_buffers()  # the scripted reply repeats the input
    gateway = gateway_factory(upstream.url, service={"max_request_body_bytes": size + (1 << 20)})
    sock = open_stream(gateway.direct_port, {"input": "x" * size}, receive_buffer=32 * 1024)
    head, seen = read_until(sock, b"event: response.completed")
    reset(sock)
    assert seen and b"[DONE]" not in head
    created = first_event(head)["response"]
    db = GatewayDb.of(gateway)
    turn = db.wait_for_turn(created["id"])
    assert turn["status"] == "completed"
    conversation = db.conversation(created["conversation"])
    assert conversation is not None and conversation["last_response_id"] == created["id"]
    # Recorded as the conversation's latest turn: previous_response_id continues it.
    upstream.clear()
    after = gateway.post("/v1/responses", {"input": "after leaving", "previous_response_id": created["id"]}).ok()
    assert after["conversation"] == created["conversation"]
    assert upstream.last()["body"]["conversation"] == created["conversation"]
