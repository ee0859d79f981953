"""The loop rules with real MCP tools, through `gateway serve` in engine mode: the SSE
transport, two calls of one round at the same time, the call timeout, `max_tool_calls`,
the turn limit, a client that goes away mid-tool (SSE, JSON, WebSocket), a background response cancelled
mid-tool, and the cap on a tool's output."""

from __future__ import annotations

import json
import socket

import pytest

from tests.support.flows import checked, kinds
from tests.support.gateway_proc import parse_sse
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server
from tests.support.raw_client import open_stream, open_websocket, read_until, reset, wait_until, websocket_text


@pytest.fixture(scope="module")
def sse(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-sse", sse=True)


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-slow", slow=True)


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, sse, slow):
    return gateway_factory(
        chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"},
        mcp_servers=[{"name": "viasse", "url": sse.url}, {"name": "slow", "url": slow.url},
                     {"name": "sleepy", "url": slow.url, "timeout": 1}])


def stream(engine, body):
    status, frames = engine.stream(body)
    assert status == 200, frames
    return checked(frames)


def items(events):
    return events[-1]["response"]["output"]


def mcp(label, **extra):
    return {"type": "mcp", "server_label": label, **extra}


def test_the_sse_transport(engine, sse):
    events = stream(engine, {"input": "Use the add tool with 2 and 3", "tools": [mcp("viasse")]})
    listing, call, message = items(events)
    assert [tool["name"] for tool in listing["tools"]] == ["add", "echo"]
    assert call["output"] == "5" and message["content"][0]["text"] == "Tool said: 5"
    assert any(r["path"] == "/sse" and r["method"] == "GET" for r in recorded_requests(sse))


def test_two_calls_of_one_round_run_at_the_same_time(engine, chat_upstream):
    meet = mcp("slow", allowed_tools=["meet_a", "meet_b"])
    events = stream(engine, {"input": "parallel-calls use the meet tools", "tools": [meet]})
    calls = [item for item in items(events) if item["type"] == "mcp_call"]
    # Each waits for the other (a barrier): both met only if they ran concurrently.
    assert [(call["name"], call["output"]) for call in calls] == [("meet_a", "met"), ("meet_b", "met")]
    fed = chat_upstream.requests("/v1/chat/completions")[-1]["body"]["messages"]
    assert [message["content"] for message in fed if message["role"] == "tool"] == ["met", "met"]


def test_max_tool_calls_refuses_the_rest(engine):
    meet = mcp("slow", allowed_tools=["meet_a", "meet_b"])
    events = stream(engine, {"input": "parallel-calls use the meet tools", "tools": [meet], "max_tool_calls": 1})
    first, second = [item for item in items(events) if item["type"] == "mcp_call"]
    assert first["output"] == "alone" and second["status"] == "failed"
    assert "limit of 1 tool calls" in second["error"]["content"][0]["text"]
    assert events[-1]["type"] == "response.completed"


def test_a_call_past_the_servers_timeout_is_an_error_result(engine):
    events = stream(engine, {"input": "Use the sleep tool for 3 seconds", "tools": [mcp("sleepy")]})
    call = next(item for item in items(events) if item["type"] == "mcp_call")
    assert call["status"] == "failed" and call["error"]["type"] == "http_error"
    assert "did not answer within 1 s" in call["error"]["message"]
    assert "mcp_call.failed" in kinds(events) and events[-1]["type"] == "response.completed"


def test_the_turn_limit(engine):
    events = stream(engine, {"input": "Use the echo tool", "tools": [mcp("viasse")], "max_infer_iters": 1})
    assert events[-1]["type"] == "response.incomplete"
    assert [item["type"] for item in items(events)] == ["mcp_list_tools", "mcp_call"]


def test_a_client_that_goes_away_cancels_the_running_call(engine, slow):
    clear_recorded_requests(slow)
    sock = open_stream(engine.direct_port, {"input": "Use the sleep tool for 20 seconds", "tools": [mcp("slow")]})
    head, seen = read_until(sock, b"response.mcp_call.in_progress")
    assert seen, head
    # The call must have reached the server (in_progress is emitted before its session
    # is open): leaving earlier cancels it before there is anything to cancel.
    wait_until(lambda: any('"tools/call"' in r["body"] for r in recorded_requests(slow)),
               "the MCP call to reach the server", timeout=10)
    reset(sock)
    # The call is cancelled at once (MCP's notifications/cancelled), long before the
    # tool would answer.
    wait_until(lambda: any("notifications/cancelled" in r["body"] for r in recorded_requests(slow)),
               "the MCP call to be cancelled", timeout=10)


def test_a_tools_output_is_cut_at_the_cap(engine, chat_upstream):
    """100,000 characters reach the item and the model, then a note saying so."""
    chat_upstream.clear()
    prompt = "Use the repeat tool with 4000"  # the scripted model repeats the prompt 4,000 times
    events = stream(engine, {"input": prompt, "tools": [mcp("slow", allowed_tools=["repeat"])]})
    listing, call, message = items(events)
    assert call["type"] == "mcp_call" and call["name"] == "repeat" and call["status"] == "completed"
    assert call["output"] == (prompt * 4000)[:100_000] + "\n[output cut at 100000 characters]"
    sent = chat_upstream.requests("/v1/chat/completions")[-1]["body"]["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == call["output"]


def test_cancelling_a_background_response_stops_its_running_call(engine, slow):
    clear_recorded_requests(slow)
    body = engine.post("/v1/responses", {"input": "Use the sleep tool for 20 seconds", "tools": [mcp("slow")],
                                         "background": True}).ok()

    wait_until(lambda: any("tools/call" in r["body"] for r in recorded_requests(slow)), "the MCP call to start")
    cancelled = engine.post(f"/v1/responses/{body['id']}/cancel").ok()
    assert cancelled["status"] == "cancelled"
    # The loop stopped: the call was cancelled (MCP's notifications/cancelled), no
    # further chat round was asked for, and the stored stream ends cancelled.
    wait_until(lambda: any("notifications/cancelled" in r["body"] for r in recorded_requests(slow)),
               "the MCP call to be cancelled", timeout=10)
    events = checked(parse_sse(engine.get(f"/v1/responses/{body['id']}?stream=true").body))
    assert "mcp_call.in_progress" in kinds(events) and "mcp_call.completed" not in kinds(events)
    assert events[-1]["type"] == "response.incomplete" and events[-1]["response"]["status"] == "cancelled"
    # The engine's own row says so too (the listing reads it).
    wait_until(lambda: any(r["id"] == body["id"] and r["status"] == "cancelled"
                           for r in engine.get("/v1/responses?limit=100").ok()["data"]), "the stored row to say so")


def _cancelled_when_the_client_resets(slow, sock) -> None:
    """The call reached the server, the client resets: MCP's notifications/cancelled
    follows at once, long before the 20 s tool would answer."""
    wait_until(lambda: any('"tools/call"' in r["body"] for r in recorded_requests(slow)),
               "the MCP call to reach the server", timeout=10)
    reset(sock)
    wait_until(lambda: any("notifications/cancelled" in r["body"] for r in recorded_requests(slow)),
               "the MCP call to be cancelled", timeout=10)


def test_a_json_client_that_goes_away_cancels_the_running_call(engine, slow):
    """A JSON (not streamed) turn: its handler is cancelled when the connection goes."""
    clear_recorded_requests(slow)
    sock = socket.create_connection(("127.0.0.1", engine.direct_port))
    data = json.dumps({"input": "Use the sleep tool for 20 seconds", "tools": [mcp("slow")]}).encode()
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    _cancelled_when_the_client_resets(slow, sock)


def test_a_websocket_client_that_goes_away_cancels_the_running_call(engine, slow):
    clear_recorded_requests(slow)
    sock = open_websocket(engine.direct_port)
    message = {"type": "response.create", "input": "Use the sleep tool for 20 seconds", "tools": [mcp("slow")]}
    sock.sendall(websocket_text(json.dumps(message).encode()))
    _cancelled_when_the_client_resets(slow, sock)
