"""A WebSocket turn is an HTTP turn (issue 26: "everything the gateway does on HTTP
... applied exactly as there"), shown through `gateway serve` by doing the same thing
both ways and comparing: tool injection (the operator's MCP and RAG tools in the body
the forward upstream receives; a real MCP server offered and called by the local
engine, its `mcp_call` arriving over the socket), model selection (the automatic model;
`model_override` refused with HTTP's status, code and body, the connection still
usable), and metrics (a WebSocket turn counted as a streamed `/v1/responses` turn, the
upgrade never timed as a response)."""

from __future__ import annotations

import json
import socket

import pytest

from tests.e2e.test_metrics import moved, scrape, value
from tests.support.gateway_proc import events_of
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server
from tests.support.raw_client import read_until, reset, wait_until
from tests.support.ws_client import connected, create, text_of

CHAT = "/v1/chat/completions"
SECRET = "ws-operator-mcp-credential"
MCP_URL = "http://127.0.0.1:9/mcp"   # the scripted upstream simulates it; nothing listens there
KEYS = {"root": ("ws-root-key-0001", ["root"]), "alice": ("ws-alice-key-0001", ["chat"]),
        "dave": ("ws-dave-key-0001", ["chat", "override"])}
ACCESS_RULES = [{"role": "chat", "actions": ["responses"]}, {"role": "override", "actions": ["model_override"]},
                {"role": "root", "actions": ["admin"]}]


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user][0]}"}


@pytest.fixture(scope="module")
def operated(gateway_factory, upstream, tmp_path_factory):
    """Forward mode with the operator's tools (an MCP server with a credential, a RAG
    store), a default model that is not the upstream's first LLM, and roles: who may
    name a model."""
    secret = tmp_path_factory.mktemp("ws-secrets") / "calc-token"
    secret.write_text(f"Bearer {SECRET}\n")
    return gateway_factory(
        upstream.url,
        authentication={"module": "api-key-token", "api_key_config": {
            "keys": [{"key": key, "user_id": user, "roles": roles} for user, (key, roles) in KEYS.items()]}},
        authorization={"access_rules": ACCESS_RULES},
        inference={"default_provider": "scripted", "default_model": "scripted-mini"},
        mcp_servers=[{"name": "calc", "url": MCP_URL, "authorization_headers": {"Authorization": str(secret)}}],
        byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"}])


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-ws")


@pytest.fixture(scope="module")
def engine_mcp(gateway_factory, chat_upstream, mcp):
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                           "api": "chat_completions"},
                           mcp_servers=[{"name": "calc", "url": mcp.url}])


def streamed_over_http(gateway, body: dict, headers: dict | None = None) -> list[dict]:
    status, frames = gateway.stream(body, headers=headers)
    assert status == 200, frames
    return list(events_of(frames))


# --- tool injection ----------------------------------------------------------------

async def test_forward_the_operators_tools_reach_the_upstream_as_on_http(operated, upstream):
    body = {"input": "hello there"}
    upstream.clear()
    streamed_over_http(operated, body, auth("alice"))
    over_http = upstream.last()["body"]
    upstream.clear()
    async with connected(operated, auth("alice")) as socket:
        await socket.send(create(body["input"]))
        events = await socket.turn()
    sent = upstream.last()["body"]
    assert events[-1]["type"] == "response.completed"
    assert sent["tools"] == over_http["tools"]
    assert [(t["type"], t.get("server_label")) for t in sent["tools"]] == [("file_search", None), ("mcp", "calc")]
    assert sent["tools"][0]["vector_store_ids"] == ["vs_handbook"]
    assert sent["tools"][1]["server_url"] == MCP_URL and sent["tools"][1]["authorization"] == SECRET
    # What the gateway attached never comes back over the socket (as on HTTP).
    shown = json.dumps(events)
    assert SECRET not in shown and MCP_URL not in shown


async def test_engine_a_configured_mcp_server_is_offered_and_called(engine_mcp, chat_upstream, mcp):
    body = {"input": "Use the add tool with 2 and 3"}
    over_http = streamed_over_http(engine_mcp, body)
    clear_recorded_requests(mcp)
    chat_upstream.clear()
    before = settled(engine_mcp)
    async with connected(engine_mcp) as socket:
        await socket.send(create(body["input"]))
        events = await socket.turn()
    after = settled(engine_mcp)
    assert moved(before, after, "gateway_tool_calls_total", tool_type="mcp", outcome="ok") == 1
    assert moved(before, after, "gateway_turns_total", backend="engine", mode="stream", outcome="completed") == 1
    # The same events as the SSE stream of the same turn, numbered from 0.
    assert [e["type"] for e in events] == [e["type"] for e in over_http]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    for kind in ("response.mcp_list_tools.completed", "response.mcp_call.in_progress",
                 "response.mcp_call.completed", "response.completed"):
        assert kind in kinds
    call = next(e["item"] for e in events if e["type"] == "response.output_item.done"
                and e["item"]["type"] == "mcp_call")
    assert (call["server_label"], call["name"], call["output"], call["status"]) == ("calc", "add", "5", "completed")
    assert json.loads(call["arguments"]) == {"a": 2, "b": 3}
    assert text_of(events) == "Tool said: 5"
    # The model was offered the server's tools; the real MCP server ran the call.
    first = chat_upstream.requests(CHAT)[0]["body"]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["add", "echo"]
    called = [json.loads(r["body"]) for r in recorded_requests(mcp)
              if r["method"] == "POST" and r["body"].startswith("{")]
    assert any(c.get("method") == "tools/call" and c["params"]["name"] == "add" for c in called)


# --- model selection ----------------------------------------------------------------

def models(gateway) -> tuple[str, str]:
    """The automatic model (what a request naming none runs on) and another LLM."""
    listed = [m["id"] for m in gateway.get("/v1/models?model_type=llm", headers=auth("root")).ok()["data"]]
    automatic = gateway.post("/v1/responses", {"input": "which model?"}, headers=auth("alice")).ok()["model"]
    return automatic, next(model for model in listed if model != automatic)


async def test_model_selection_and_model_override_as_on_http(operated, upstream):
    automatic, other = models(operated)
    assert automatic.endswith("scripted-mini")   # the configured default, not the first LLM
    refused_over_http = operated.post("/v1/responses", {"input": "x", "model": other, "stream": True},
                                      headers=auth("alice"))
    assert refused_over_http.status == 403
    async with connected(operated, auth("alice")) as socket:
        upstream.clear()
        await socket.send(create("no model named", store=False))
        first = (await socket.turn())[-1]["response"]
        assert first["model"] == automatic and upstream.last()["body"]["model"] == automatic
        # Naming another model without `model_override`: HTTP's refusal, nothing sent...
        upstream.clear()
        await socket.send(create("x", model=other, stream_id="lane-1"))
        error = await socket.next()
        assert [r for r in upstream.requests() if r["method"] != "GET"] == []
        assert error["type"] == "error" and error["status"] == refused_over_http.status
        assert error["stream_id"] == "lane-1"
        http = refused_over_http.json()
        assert error["error"]["code"] == http["error"]["code"] == "model_override_forbidden"
        assert error["error"]["type"] == http["error"]["type"] and error["error"]["param"] == "model"
        assert error["error"]["detail"] == http["detail"]
        # ...audited as HTTP's refusal is (the route says it came over the socket).
        wait_until(lambda: "refused status=403 module=api-key-token route=GET /v1/responses (websocket) "
                           "client=127.0.0.1" in operated.log(), "the refusal's audit line")
        assert KEYS["alice"][0] not in operated.log()
        # ...and a refused continuation evicts what it continued from (an error message,
        # before any event: the other path of ws_compliance_failed_continuation_evicts).
        await socket.send(create("x", model=other, store=False, previous_response_id=first["id"]))
        assert (await socket.next())["error"]["code"] == "model_override_forbidden"
        await socket.send(create("again", store=False, previous_response_id=first["id"]))
        assert (await socket.next())["error"]["code"] == "previous_response_not_found"
        # Naming the automatic model is no override; the connection is still usable.
        await socket.send(create("the same model", model=automatic))
        assert (await socket.turn())[-1]["type"] == "response.completed"
    async with connected(operated, auth("dave")) as socket:   # with `model_override`: any model
        upstream.clear()
        await socket.send(create("another model", model=other))
        assert (await socket.turn())[-1]["response"]["model"] == other
        assert upstream.last()["body"]["model"] == other


# --- metrics ------------------------------------------------------------------------

def settled(gateway, headers: dict[str, str] | None = None) -> dict:
    """A scrape once nothing but the scrape itself is in flight (every socket ended)."""
    found = {}

    def quiet() -> bool:
        found["s"] = scrape(gateway, headers)
        return value(found["s"], "gateway_http_requests_in_flight") <= 1
    wait_until(quiet, "the gateway to have nothing in flight")
    return found["s"]


async def test_websocket_turns_are_counted_as_streamed_http_turns(operated):
    before = settled(operated, auth("root"))
    streamed_over_http(operated, {"input": "over http"}, auth("alice"))
    after_http = settled(operated, auth("root"))
    async with connected(operated, auth("alice")) as socket:
        for text in ("one", "two"):
            await socket.send(create(text))
            assert (await socket.turn())[-1]["type"] == "response.completed"
        await socket.send(create("refused", not_a_field=1))   # the request model's 422: no LLM call
        assert (await socket.next())["status"] == 422
    after_ws = settled(operated, auth("root"))
    assert moved(after_http, after_ws, "ls_llm_validation_errors_total", endpoint="/v1/responses") == 1
    for counted, turns in ((moved(before, after_http, "ls_llm_calls_total", endpoint="/v1/responses"), 1),
                           (moved(after_http, after_ws, "ls_llm_calls_total", endpoint="/v1/responses"), 2)):
        assert counted == turns
    for start, end, turns in ((before, after_http, 1), (after_http, after_ws, 2)):
        assert moved(start, end, "gateway_turns_total", backend="forward", mode="stream", outcome="completed") \
            == turns
        assert moved(start, end, "gateway_turns_total", mode="json") == 0
        assert moved(start, end, "ls_llm_token_received_total", endpoint="/v1/responses") > 0
        assert moved(start, end, "ls_llm_inference_duration_seconds_count", endpoint="/v1/responses") == turns
        assert moved(start, end, "gateway_time_to_first_event_seconds_count", backend="forward", mode="stream") \
            == turns
    # The POST is timed as a response; the upgrade is a call (101) but its session is not
    # a response time.
    assert moved(before, after_http, "ls_response_duration_seconds_count", path="/v1/responses") == 1
    assert moved(after_http, after_ws, "ls_response_duration_seconds_count", path="/v1/responses") == 0
    assert moved(after_http, after_ws, "ls_rest_api_calls_total", path="/v1/responses", status_code="101") == 1
    assert moved(after_http, after_ws, "ls_rest_api_calls_total", path="/v1/responses", status_code="200") == 0
    # A socket the client closed with the close handshake is no client that left (499;
    # one the gateway closes: test_websocket.py's test_idle_connection_is_closed)...
    assert moved(after_http, after_ws, "ls_rest_api_calls_total", path="/v1/responses", status_code="499") == 0
    # ...one whose connection went away without it is. A client that leaves mid-turn:
    # the turn is `abandoned`, as an HTTP stream whose client leaves.
    async with connected(operated, auth("alice")) as socket:
        await socket.send(create("please stall-stream"))
        assert (await socket.next())["type"] == "response.created"
    dropped(operated, auth("alice"))
    after_drop = settled(operated, auth("root"))
    assert moved(after_ws, after_drop, "gateway_turns_total", mode="stream", outcome="abandoned") == 1
    assert moved(after_ws, after_drop, "ls_llm_calls_total", endpoint="/v1/responses") == 1
    assert moved(after_ws, after_drop, "ls_llm_calls_failures_total", endpoint="/v1/responses") == 0
    assert moved(after_ws, after_drop, "ls_rest_api_calls_total", path="/v1/responses", status_code="499") == 1
    assert moved(after_ws, after_drop, "ls_rest_api_calls_total", path="/v1/responses", status_code="101") == 1
    assert moved(after_http, after_drop, "ls_response_duration_seconds_count", path="/v1/responses") == 0


def dropped(gateway, headers: dict[str, str]) -> None:
    """An upgraded socket whose client vanishes (a TCP reset, no close frame)."""
    sock = socket.create_connection(("127.0.0.1", gateway.direct_port))
    sent = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sock.sendall(b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                 + sent.encode() + b"\r\n")
    head, _ = read_until(sock, b"\r\n\r\n", timeout=10)
    assert head.startswith(b"HTTP/1.1 101"), head
    reset(sock)
