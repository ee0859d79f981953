"""`/v1/responses` over a WebSocket through `gateway serve` (issue 26), with the
`openai` package's own client (`client.responses.connect()`) and aiohttp's, in front of
the scripted upstream in forward mode and in local-engine mode. Every server message is
validated against the `openai` package's server-event types.

The `ws_compliance_*` tests are a Python port of six WebSocket checks derived from the
OpenResponses 2026-04-24 specification's "WebSocket Transport" section (the stored
versions of the public compliance suite, `src/lib/compliance-tests.ts`, hold only its
six HTTP tests; docs/websocket.md says so)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest
from openai import AsyncOpenAI

from tests.e2e.test_metrics import moved
from tests.e2e.test_websocket_parity import settled
from tests.support.auth_peers import JwksServer, SigningKey, claims
from tests.support.flows import WEATHER_TOOL
from tests.support.openai_shapes import replay_through_sdk
from tests.support.raw_client import wait_until
from tests.support.ws_client import TERMINAL, connected, create, opened, text_of

KEY = SigningKey.rsa("ws-1")


DAILY = {"name": "daily", "type": "user_limiter", "initial_quota": 10**9, "quota_increase": 0, "period": "1 day"}


@pytest.fixture(scope="module")
def forward(gateway_factory, upstream, tmp_path_factory):
    quotas = str(tmp_path_factory.mktemp("ws-quotas") / "quotas.db")
    return gateway_factory(upstream.url, service={"host": "127.0.0.1", "port": 8080, "access_log": False,
                                                  "cors": {"allow_origins": ["https://app.example"]},
                                                  "websocket": {"max_queued_messages": 2,
                                                                # Long enough for a loaded CI machine
                                                                # between two messages of one test.
                                                                "idle_timeout_seconds": 6}},
                           quota_handlers={"sqlite": {"db_path": quotas}, "limiters": [DAILY]})


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                           "api": "chat_completions"})


@pytest.fixture(scope="module")
def jwks():
    server = JwksServer(KEY)
    yield server
    server.close()


@pytest.fixture(scope="module")
def short(gateway_factory, upstream, jwks):
    """Short limits and JWT authentication (tokens that expire during a connection)."""
    return gateway_factory(upstream.url, service={
        "host": "127.0.0.1", "port": 8080, "access_log": False,
        # 6 s: past the token expiry test's ~3.1 s on a loaded machine.
        "websocket": {"max_connection_seconds": 6, "idle_timeout_seconds": 60, "max_connections_per_user": 2}},
        authentication={"module": "jwk-token", "jwk_config": {
            "url": jwks.url, "issuer": "https://issuer.test", "audience": "gateway", "leeway_seconds": 0,
            "jwt_configuration": {"user_id_claim": "sub", "username_claim": "preferred_username"}}})


def bearer(**extra: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY.sign(claims(**extra))}"}


# --- the six checks of the spec's WebSocket section --------------------------------

@pytest.mark.parametrize("mode", ["forward", "engine"])
async def test_ws_compliance_basic_response(mode, request):
    """ws-basic-response: one response.create gives the same events as SSE, numbered
    from 0, ending with response.completed, and the SDK's accumulator takes them."""
    gateway = request.getfixturevalue(mode)
    async with connected(gateway) as socket:
        await socket.send(create("Say hello in exactly 3 words.", store=False))
        events = await socket.turn()
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert replay_through_sdk(events).output_text == text_of(events)


async def test_ws_compliance_transport_fields_refused(forward):
    """ws-transport-fields: stream, stream_options and background are refused in the
    spec's error envelope, and the connection stays usable."""
    async with connected(forward) as socket:
        for field, value in (("stream", True), ("stream_options", {"include_obfuscation": False}),
                             ("background", True)):
            await socket.send(create("hi", **{field: value}))
            error = await socket.next()
            assert error["type"] == "error" and error["status"] == 400
            assert error["error"]["param"] == field and error["error"]["type"] == "invalid_request_error"
        await socket.send(create("still here"))
        assert (await socket.turn())[-1]["type"] == "response.completed"


@pytest.mark.parametrize("mode", ["forward", "engine"])
async def test_ws_compliance_sequential_turns(mode, request):
    """ws-sequential: two response.create sent back to back run one after the other,
    in message order, never interleaved."""
    gateway = request.getfixturevalue(mode)
    async with connected(gateway) as socket:
        await socket.send(create("first one", store=False))
        await socket.send(create("second one", store=False))
        first, second = await socket.turn(), await socket.turn()
    assert text_of(first).endswith("first one") and text_of(second).endswith("second one")
    assert {e["response"]["id"] for e in first if "response" in e}.isdisjoint(
        {e["response"]["id"] for e in second if "response" in e})


@pytest.mark.parametrize("mode", ["forward", "engine"])
async def test_ws_compliance_continuation_store_false(mode, request, upstream, chat_upstream):
    """ws-continuation: a store:false follow-up with previous_response_id and only the
    new items continues from the connection's memory; nothing is stored."""
    gateway = request.getfixturevalue(mode)
    async with connected(gateway) as socket:
        await socket.send(create("My name is Alice.", store=False))
        first = (await socket.turn())[-1]["response"]
        await socket.send(create("What is my name?", store=False, previous_response_id=first["id"]))
        second = (await socket.turn())[-1]["response"]
    assert second["status"] == "completed" and second["previous_response_id"] == first["id"]
    # The scripted model counts the user messages it was sent: both turns' were.
    assert "turn 2" in second["output"][-1]["content"][0]["text"]
    assert gateway.get(f"/v1/responses/{first['id']}").status == 404   # stored nowhere


async def test_ws_compliance_previous_response_not_found(forward):
    """ws-previous-not-found: an id the connection does not hold and no store has is
    `previous_response_not_found` (400), and the connection stays usable."""
    async with connected(forward) as socket:
        await socket.send(create("go on", store=False, previous_response_id="resp_unknown"))
        error = await socket.next()
        assert error["status"] == 400 and error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id"
        await socket.send(create("fresh start", store=False))
        assert (await socket.turn())[-1]["type"] == "response.completed"


async def test_ws_compliance_failed_continuation_evicts(forward):
    """ws-evict: a continuation that fails evicts the id it continued from; a later
    continuation from it is `previous_response_not_found`. The scripted upstream fails a
    streamed turn after it began (`fail-upstream`: created, in_progress, then
    response.failed, gateway/devserver/responses.py), so the failure arrives as
    `response.failed`, as on SSE, not as an error message (a refusal before the first
    event is one: tests/e2e/test_websocket_parity.py evicts on that path)."""
    async with connected(forward) as socket:
        await socket.send(create("remember this", store=False))
        first = (await socket.turn())[-1]["response"]
        await socket.send(create("please fail-upstream", store=False, previous_response_id=first["id"]))
        failed = await socket.turn()
        assert [e["type"] for e in failed] == ["response.created", "response.in_progress", "response.failed"]
        assert failed[-1]["response"]["status"] == "failed"
        assert failed[-1]["response"]["error"]["code"] == "server_error"
        assert "scripted upstream failure" in failed[-1]["response"]["error"]["message"]
        assert failed[-1]["response"]["previous_response_id"] == first["id"]   # as the client named it
        await socket.send(create("and now?", store=False, previous_response_id=first["id"]))
        error = await socket.next()
        assert error["type"] == "error" and error["status"] == 400
        assert error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id"


@pytest.mark.parametrize("mode", ["forward", "engine"])
async def test_ws_compliance_unmatched_tool_output_fails_and_evicts(mode, request):
    """The suite's `websocket-failed-continuation-evicts-cache`: a store:false
    continuation whose only input is a `function_call_output` answering no call in the
    held context fails (400, OpenAI's message), and the retry from the same id is then
    `previous_response_not_found`."""
    gateway = request.getfixturevalue(mode)
    async with connected(gateway) as socket:
        await socket.send(create("Remember the code word: ember. Reply with OK.", store=False))
        first = (await socket.turn())[-1]["response"]
        await socket.send({"type": "response.create", "store": False, "previous_response_id": first["id"],
                           "input": [{"type": "function_call_output", "call_id": "call_openresponses_missing",
                                      "output": "No matching tool call exists in the previous response."}]})
        error = await socket.next()
        assert error["type"] == "error" and error["status"] == 400, error
        assert error["error"]["message"].endswith("No tool call found for function call output with call_id "
                                                  "call_openresponses_missing.")
        assert error["error"]["param"] == "input"
        await socket.send(create("Try to continue after the failed turn. Reply with exactly: stale", store=False,
                                 previous_response_id=first["id"]))
        error = await socket.next()
        assert error["type"] == "error" and error["error"]["code"] == "previous_response_not_found", error


# --- the openai package's client ---------------------------------------------------

async def test_openai_client_turns_continuation_store_true_and_steer(forward):
    client = AsyncOpenAI(base_url=f"{forward.url}/v1", api_key="unused")
    async with client.responses.connect() as connection:
        await connection.send({"type": "response.create", "input": "first, stored", "store": True})
        first = await _terminal(connection)
        await connection.send({"type": "response.create", "input": "second", "store": True,
                                "previous_response_id": first.response.id})
        second = await _terminal(connection)
        await connection.send({"type": "response.create", "input": "third, from the first", "store": True,
                                "previous_response_id": first.response.id})
        third = await _terminal(connection)   # an older stored id: loaded from the store
        await connection.send({"type": "response.steer", "input": "faster", "previous_response_id": third.response.id})
        refused = await connection.recv()
        await connection.send({"type": "response.create", "input": "on a lane", "stream_id": "lane-a"})
        lane = [event async for event in _until_terminal(connection)]
    assert first.type == second.type == third.type == "response.completed"
    assert second.response.previous_response_id == first.response.id
    assert forward.get(f"/v1/responses/{second.response.id}").status == 200   # stored
    assert refused.type == "response.steer.failed" and refused.error.code == "steering_not_supported"
    assert refused.steer.input == "faster"
    assert {event.stream_id for event in lane} == {"lane-a"}


async def _until_terminal(connection):
    async for event in connection:
        yield event
        if event.type in TERMINAL:
            return


async def _terminal(connection):
    async for event in _until_terminal(connection):
        last = event
    return last


# --- errors, limits, lifecycle ---------------------------------------------------------

async def test_malformed_messages_get_errors_and_the_connection_stays(forward):
    big = "x" * (10 * 1024 * 1024 + 10)   # over service.max_request_body_bytes, under the hard limit
    async with connected(forward) as socket:
        for raw, code in (("{not json", "invalid_json"), ("[1, 2]", "invalid_message"),
                          ('{"type": "session.update"}', "unknown_message_type"),
                          (orjson.dumps(create(big)).decode(), "message_too_large")):
            await socket.send(raw)
            error = await socket.next()
            assert error["type"] == "error" and error["error"]["code"] == code, error
        await socket.send(create("still fine"))
        assert (await socket.turn())[-1]["type"] == "response.completed"


async def test_queue_behind_a_running_turn_is_bounded(forward):
    async with connected(forward) as socket:
        slow = {"metadata": {"scripted_delay_ms": "40"}}
        for n in range(4):   # one runs, two wait (max_queued_messages: 2), one is refused
            await socket.send(create(f"turn {n}", **slow))
        messages = [await socket.next() for _ in range(1)]
        while sum(m["type"] in TERMINAL for m in messages) < 4:
            messages.append(await socket.next())
    errors = [m for m in messages if m["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == ["websocket_queue_full"]
    done = [m["response"]["output"][-1]["content"][0]["text"] for m in messages if m["type"] == "response.completed"]
    assert [text[-6:] for text in done] == ["turn 0", "turn 1", "turn 2"]


async def test_origin_is_checked_against_cors(forward):
    session = aiohttp.ClientSession()
    try:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"ws://127.0.0.1:{forward.port}/v1/responses",
                                     headers={"Origin": "https://evil.example"})
        assert refused.value.status == 403
        ws = await session.ws_connect(f"ws://127.0.0.1:{forward.port}/v1/responses",
                                      headers={"Origin": "https://app.example"})
        await ws.close()
    finally:
        await session.close()
    # The route is still the list without an Upgrade header.
    assert forward.get("/v1/responses").status in (200, 501)


async def test_disconnect_mid_turn_cancels_the_upstream(forward, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    session, socket = await opened(forward)
    await socket.send(create("please stall-stream"))
    assert (await socket.next())["type"] == "response.created"
    assert upstream.open_streams() == 1
    await socket.ws.close()
    await session.close()
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be cancelled", timeout=10)


async def test_auth_refused_at_the_upgrade_and_expired_between_turns(short):
    session = aiohttp.ClientSession()
    try:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"ws://127.0.0.1:{short.port}/v1/responses")
        assert refused.value.status == 401
        reply = short.get("/v1/responses", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        assert reply.status == 401 and reply.json()["detail"]["response"].startswith("Missing or invalid")
    finally:
        await session.close()
    expires = int(time.time()) + 2
    async with connected(short, bearer(sub="soon-expired", exp=expires)) as socket:
        await socket.send(create("while valid"))
        assert (await socket.turn())[-1]["type"] == "response.completed"
        await asyncio.sleep(max(0.0, expires - time.time()) + 1.1)
        await socket.send(create("after expiry"))
        error = await socket.next()
        assert error["status"] == 401 and error["error"]["type"] == "authentication_error"


async def test_connection_limit_after_the_running_turn(short):
    started = time.monotonic()
    async with connected(short, bearer(sub="limited")) as socket:
        await socket.send(create("slow one", metadata={"scripted_delay_ms": "600"}))
        await socket.send(create("queued"))
        events = await socket.turn(timeout=40)   # runs past the 6 s limit, and completes
        assert events[-1]["type"] == "response.completed" and time.monotonic() - started > 6
        limit = [await socket.next(), await socket.next()]
        closing = await socket.ws.receive(5)
    assert [m["error"]["code"] for m in limit] == ["websocket_connection_limit_reached"] * 2
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 1000


async def test_open_sockets_per_user_are_bounded(short):
    headers = bearer(sub="many-sockets")
    async with connected(short, headers), connected(short, headers):
        session = aiohttp.ClientSession()
        try:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(f"ws://127.0.0.1:{short.port}/v1/responses", headers=headers)
            assert refused.value.status == 429
        finally:
            await session.close()


async def test_idle_connection_is_closed(forward):
    before = settled(forward)
    async with connected(forward) as socket:
        error = await socket.next(timeout=20)
        closing = await socket.ws.receive(5)
    assert error["error"]["code"] == "websocket_idle_timeout" and error["status"] == 408
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 1000
    # A socket the gateway closed with the close handshake ended normally (101, not 499).
    after = settled(forward)
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/responses", status_code="101") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/responses", status_code="499") == 0


async def test_shutdown_closes_open_sockets(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"ws://127.0.0.1:{gateway.direct_port}/v1/responses")
        await ws.send_str(orjson.dumps(create("please stall-stream")).decode())
        assert orjson.loads((await ws.receive(10)).data)["type"] == "response.created"
        stopping = asyncio.get_running_loop().run_in_executor(None, gateway.proc.stop)
        closing = await ws.receive(15)
        while closing.type is aiohttp.WSMsgType.TEXT:   # events already on their way
            closing = await ws.receive(15)
        await stopping
    assert closing.type is aiohttp.WSMsgType.CLOSE and closing.data == 1001
    wait_until(lambda: upstream.open_streams() == 0, "the stalled upstream stream to be closed", timeout=10)


@pytest.mark.parametrize("mode", ["forward", "engine"])
async def test_function_call_loop_with_store_false(mode, request):
    """An agent's loop: the model calls a function, the client continues with only its
    output and the connection's memory supplies the call."""
    gateway = request.getfixturevalue(mode)
    async with connected(gateway) as socket:
        await socket.send(create("Weather in Rome? Use the tool.", store=False, tools=[WEATHER_TOOL]))
        first = (await socket.turn())[-1]["response"]
        call = next(item for item in first["output"] if item["type"] == "function_call")
        await socket.send({"type": "response.create", "store": False, "previous_response_id": first["id"],
                           "tools": [WEATHER_TOOL], "input": [{"type": "function_call_output",
                                                                "call_id": call["call_id"], "output": "sunny"}]})
        second = (await socket.turn())[-1]
    assert second["type"] == "response.completed", second
    assert "sunny" in second["response"]["output"][-1]["content"][0]["text"]


async def test_quotas_and_ownership_as_on_http(forward):
    """Each turn is charged and shows the balance after it; another user's stored
    response cannot be continued (`previous_response_not_found`, as its 404 on HTTP)."""
    async with connected(forward, query="?user_id=ws-alice") as socket:
        await socket.send(create("one", max_output_tokens=50))
        first = (await socket.turn())[-1]["response"]
        await socket.send(create("two", max_output_tokens=50, previous_response_id=first["id"]))
        second = (await socket.turn())[-1]["response"]
    assert first["available_quotas"]["daily"] > second["available_quotas"]["daily"]
    assert forward.get("/v1/quotas?user_id=ws-alice").ok()["available_quotas"]["daily"] == \
        second["available_quotas"]["daily"]
    assert second["conversation"] == first["conversation"]   # continued, stored, owned
    async with connected(forward, query="?user_id=ws-bob") as socket:
        await socket.send(create("mine now?", previous_response_id=second["id"]))
        error = await socket.next()
    assert error["error"]["code"] == "previous_response_not_found"
