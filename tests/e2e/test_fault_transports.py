"""Every upstream fault on every transport (issue 42), in forward and engine mode,
through `gateway serve`: what the client sees (an error before anything was sent,
`response.failed` or LCORE's `error` event after; a background run that GET shows
failed), what the turn is charged (nothing when the upstream never had it or refused it
outright; the reservation when it had it and lost it before reporting usage), and that
the conversation keeps no half-written turn. The faults are the scripted upstream's
triggers (gateway/devserver/triggers.py); "refused" is a gateway whose upstream port has
nothing listening. docs/resilience.md has the table this checks."""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_proc import parse_sse
from tests.support.processes import free_port
from tests.support.ws_client import connected, create

INITIAL = 10 ** 6
OUTPUT = 99
TIMEOUT = 0.5   # llama_stack.timeout: the stalls are noticed this fast
LIMITER = {"name": "daily", "type": "user_limiter", "initial_quota": INITIAL, "quota_increase": 0, "period": "1 day"}
TRANSPORTS = ("json", "sse", "websocket", "query", "streaming_query", "background")


@dataclass(frozen=True)
class Seen:
    """What a client saw: `error` (the HTTP status, or the status of a WebSocket's or a
    query stream's error before the turn started), or the turn's end (`failed`,
    `completed`) and its message."""

    kind: str
    status: int = 200
    message: str = ""


def gateways(factory, url: str, mode: str, tmp_path_factory, **llama_stack):
    quotas = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("faults") / "quotas.db")},
              "output_reservation": OUTPUT, "limiters": [LIMITER]}
    if mode == "engine":
        config = engine_config(url)
        config["llama_stack"].update(timeout=TIMEOUT, **llama_stack)
        return factory(url, quota_handlers=quotas, **config)
    return factory(url, llama_stack={"timeout": TIMEOUT, **llama_stack}, quota_handlers=quotas)


@pytest.fixture(scope="module", params=["forward", "engine"])
def mode(request):
    return request.param


@pytest.fixture(scope="module")
def faulty(mode, gateway_factory, upstream, chat_upstream, tmp_path_factory):
    url = upstream.url if mode == "forward" else chat_upstream.url
    gateway = gateways(gateway_factory, url, mode, tmp_path_factory)
    gateway.mode = mode
    return gateway


@pytest.fixture(scope="module")
def unreachable(mode, gateway_factory, tmp_path_factory):
    gateway = gateways(gateway_factory, f"http://127.0.0.1:{free_port()}", mode, tmp_path_factory)
    gateway.mode = mode
    return gateway


def reservation(text: str) -> int:
    return math.ceil(len(json.dumps(text)) / 4) + OUTPUT


def charged(gateway, user: str) -> int:
    return INITIAL - gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def turn(gateway, transport: str, text: str, user: str) -> tuple[Seen, str | None]:
    """One turn on `transport`: what the client saw, and the conversation it names."""
    path = f"?user_id={user}"
    body = {"input": text, "max_output_tokens": OUTPUT, "tool_choice": "none"}
    if transport == "json":
        reply = gateway.post("/v1/responses" + path, body)
        if reply.status != 200:
            return Seen("error", reply.status, reply.json()["detail"]["cause"]), None
        data = reply.json()
        return Seen(data["status"], 200, (data.get("error") or {}).get("message", "")), data["conversation"]
    if transport == "sse":
        reply = gateway.post("/v1/responses" + path, {**body, "stream": True}, timeout=30)
        if reply.status != 200:
            return Seen("error", reply.status, reply.json()["detail"]["cause"]), None
        frames = parse_sse(reply.body)
        assert frames[-1] == (None, "[DONE]"), frames[-2:]
        end = frames[-2][1]
        return (Seen(end["type"].removeprefix("response."), 200, (end["response"].get("error") or {}).get("message", "")),
                end["response"]["conversation"])
    if transport == "websocket":
        return asyncio.run(websocket_turn(gateway, text, user))
    if transport in ("query", "streaming_query"):
        reply = gateway.post(f"/v1/{transport}" + path, {"query": text}, timeout=30)
        if reply.status != 200:
            return Seen("error", reply.status, reply.json()["detail"]["cause"]), None
        if transport == "query":
            return Seen("completed"), reply.json()["conversation_id"]
        frames = [json.loads(block[6:]) for block in reply.body.decode().split("\n\n") if block.startswith("data: ")]
        conversation = frames[0]["data"].get("conversation_id") if frames[0]["event"] == "start" else None
        errors = [frame for frame in frames if frame["event"] == "error"]
        if errors:
            return Seen("failed", 200, json.dumps(errors[0]["data"])), conversation
        assert frames[-1]["event"] == "end", frames[-2:]
        return Seen("completed"), conversation
    assert transport == "background"
    reply = gateway.post("/v1/responses" + path, {**body, "background": True})
    if reply.status != 200:
        return Seen("error", reply.status, reply.json()["detail"]["cause"]), None
    created = reply.json()
    deadline = time.monotonic() + 20
    while True:
        shown = gateway.get(f"/v1/responses/{created['id']}" + path).ok()
        if shown["status"] not in ("queued", "in_progress"):
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)
    return Seen(shown["status"], 200, (shown.get("error") or {}).get("message", "")), created.get("conversation")


async def websocket_turn(gateway, text: str, user: str) -> tuple[Seen, str | None]:
    async with connected(gateway, query=f"?user_id={user}") as socket:
        await socket.send(create(text, max_output_tokens=OUTPUT, tool_choice="none"))
        events = await socket.turn(timeout=20)
    end = events[-1]
    if end["type"] == "error":
        return Seen("error", end["status"], end["error"]["message"]), None
    response = end["response"]
    return (Seen(end["type"].removeprefix("response."), 200, (response.get("error") or {}).get("message", "")),
            response["conversation"])



# fault: (the trigger, before anything was sent, the message after it started, charged the reservation)
LOST = {"reset": "The upstream stream broke: the upstream closed the connection.",
        "idle": "The upstream stopped sending events (idle timeout).",
        "cut": "The upstream stream ended without a terminal event.",
        "malformed": "The upstream sent an event that is not JSON."}
TRIGGERS = {"refused": "hello", "reset": "please reset-stream", "stall-first": "please hang-upstream",
            "idle": "please stall-stream", "cut": "please cut-frame", "malformed": "please not-json-frame",
            "5xx": "please upstream-503", "429": "please rate-limited", "429-retry-after": "please rate-limited-after"}
QUOTA_429 = "The token quota for model scripted-chat has been exceeded."
# Refused before anything was sent: the status and the cause.
REFUSALS = {"refused": (503, "Connection error."), "stall-first": (503, "Request timed out."),
            "5xx": (500, "scripted 503"), "429": (429, QUOTA_429), "429-retry-after": (429, QUOTA_429)}


def expected(mode: str, transport: str, fault: str) -> Seen | None:
    """What the client sees (docs/resilience.md); None: the fault cannot happen there (a
    forward JSON turn and `/v1/query` read a JSON body, no stream)."""
    if fault in LOST:
        if mode == "forward" and transport in ("json", "query"):
            return None
        if transport == "query":
            return Seen("error", 500, LOST[fault])
        return Seen("failed", 200, LOST[fault])
    status, cause = REFUSALS[fault]
    # An engine background run starts at once (its creator is answered `queued`): a
    # refusal of its first round shows as the run failed.
    if transport == "background" and mode == "engine" and fault != "refused":
        return Seen("failed", 200, cause)
    return Seen("error", status, cause)


def seen_as(seen: Seen, transport: str) -> Seen:
    """The WebSocket's error says `<response>: <cause>`; LCORE's error event is its JSON."""
    if transport == "websocket" and seen.kind == "error":
        return Seen(seen.kind, seen.status, seen.message.split(": ", 1)[1])
    if transport == "streaming_query" and seen.kind == "failed":
        data = json.loads(seen.message)
        assert data["response"] == "Error while processing query" and data["status_code"] == 500, data
        return Seen(seen.kind, seen.status, data["cause"])
    return seen


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_fault_on_every_transport(faulty, unreachable, transport):
    wrong = []
    for fault, text in TRIGGERS.items():
        gateway = unreachable if fault == "refused" else faulty
        want = expected(gateway.mode, transport, fault)
        if want is None:
            continue
        user = f"{transport}-{fault}"
        started = time.monotonic()
        seen, conversation = turn(gateway, transport, text, user)
        took = time.monotonic() - started
        cost = charged(gateway, user)
        want_cost = reservation(text) if fault in LOST or fault == "stall-first" else 0
        if seen_as(seen, transport) != want or cost != want_cost or took > 5:
            wrong.append(f"{fault}: saw {seen} charged {cost} in {took:.1f} s; want {want} charged {want_cost}")
        elif gateway.mode == "engine" and conversation is not None and transport != "streaming_query":
            # The failed turn left nothing in its conversation: the next one is its first.
            # (Forward mode: the upstream keeps the conversation.)
            reply = gateway.post(f"/v1/responses?user_id={user}", {"input": "and now?", "conversation": conversation})
            if b"(turn 1, 1 messages)" not in reply.body:
                wrong.append(f"{fault}: the conversation kept the failed turn: {reply.body[:300]!r}")
    assert not wrong, "\n".join(wrong)


def test_a_websocket_outlives_its_turns_faults(faulty):
    async def run():
        async with connected(faulty, query="?user_id=ws-outlives") as socket:
            ends = []
            for text in ("please reset-stream", "please not-json-frame", "please rate-limited", "hello"):
                await socket.send(create(text, tool_choice="none"))
                ends.append((await socket.turn(timeout=20))[-1])
        return ends
    ends = asyncio.run(run())
    assert [end["type"] for end in ends] == ["response.failed", "response.failed", "error", "response.completed"]
