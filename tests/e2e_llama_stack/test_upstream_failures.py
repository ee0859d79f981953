"""Llama Stack 0.7.3 refusing a turn, through `gateway serve`: its 4xx keeps its status,
a context-length failure of its backend is a 413, and neither leaves a turn in the
gateway's database. (Bodies are checked by the envelope tests in test_errors.py.)"""

from __future__ import annotations

import pytest

from tests.support.gateway_db import Counts, GatewayDb

from .helpers import checked, kinds

pytestmark = pytest.mark.llama_stack


def fork_of_a_lost_response(gw, stack, user: str) -> str:
    """Two turns, then Llama Stack loses the first response behind the gateway's back: a
    fork from it passes the gateway's checks and is refused by Llama Stack (404)."""
    first = gw.post(f"/v1/responses?user_id={user}", {"input": "one"}).ok()
    second = gw.post(f"/v1/responses?user_id={user}", {"input": "two", "conversation": first["conversation"]}).ok()
    GatewayDb.of(gw).wait_for_turn(second["id"])
    assert stack.endpoint.delete(f"/v1/responses/{first['id']}").status == 200
    return first["id"]


def test_llama_stack_4xx_keeps_its_status(gw, stack, chain):
    lost = fork_of_a_lost_response(gw, stack, "lost-response")
    chain.scripted.clear()
    reply = gw.post("/v1/responses?user_id=lost-response", {"input": "fork", "previous_response_id": lost})
    assert reply.status == 404, reply.body
    assert lost.encode() in reply.body  # Llama Stack's message names the response
    assert chain.scripted.requests("/v1/chat/completions") == []  # refused before inference
    db = GatewayDb.of(gw)
    db.flush()
    assert db.counts(user_id="lost-response") == Counts(conversations=1, turns=2)  # the two turns only


def test_llama_stack_4xx_keeps_its_status_when_streamed(gw, stack):
    lost = fork_of_a_lost_response(gw, stack, "lost-response-streamed")
    reply = gw.post("/v1/responses?user_id=lost-response-streamed",
                    {"input": "fork", "previous_response_id": lost, "stream": True})
    # Llama Stack refuses it inside a 200 stream, before any event: the gateway has sent
    # nothing yet, so the client gets the status, as for a request that is not streamed.
    assert reply.status == 404, reply.body
    assert lost.encode() in reply.body and reply.json()["error"]["code"] == "upstream_not_found"


def test_context_length_from_llama_stack_is_413(gw, chain):
    db = GatewayDb.of(gw)
    chain.scripted.clear()
    reply = gw.post("/v1/responses?user_id=long-prompt", {"input": "please context-overflow now"})
    assert reply.status == 413, reply.body
    # Llama Stack did run the turn: its backend refused the prompt as too long.
    assert [r["body"]["model"] for r in chain.scripted.requests("/v1/chat/completions")] == ["scripted-chat"]
    db.flush()
    assert db.counts(user_id="long-prompt") == Counts(conversations=0, turns=0)
    # Streamed, Llama Stack has begun the stream before its backend fails: no status to
    # change any more, the stream ends with response.failed.
    status, frames = gw.stream({"input": "please context-overflow now"})
    assert status == 200
    events = checked(frames)
    assert kinds(events) == ["created", "in_progress", "failed"]
    assert "context_length_exceeded" in events[-1]["response"]["error"]["message"]
