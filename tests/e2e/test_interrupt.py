"""`POST /v1/streaming_query/interrupt` through `gateway serve`: a user stops their own
running stream (it ends with the stopped-by-the-user token and `interrupted`, no
`end`, and is charged as an abandoned turn), and LCORE's four refusals. The partial
answer is kept and the conversation goes on from it, in forward mode and on the local
engine."""

from __future__ import annotations

import http.client
import time
import json
import uuid

import pytest

from tests.e2e.test_metrics import moved, scrape
from tests.support.engine_gateway import engine_config
from tests.support.gateway_db import GatewayDb
from tests.support.raw_client import wait_until

LIMITS = [{"name": "daily", "type": "user_limiter", "initial_quota": 100000, "quota_increase": 0,
           "period": "1 day"}]


@pytest.fixture(scope="module")
def slow(upstream_with, gateway_factory, tmp_path_factory):
    """A gateway in front of an upstream that waits 150 ms between stream events."""
    upstream = upstream_with("--delay-ms", "150")
    quota = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("interrupt-quota") / "q.db")}, "limiters": LIMITS}
    return gateway_factory(upstream.url, quota_handlers=quota), upstream


class Stream:
    """A streaming query read line by line, as it arrives."""

    def __init__(self, gateway, body, user):
        self.conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
        self.conn.request("POST", f"/v1/streaming_query?user_id={user}", body=json.dumps(body),
                          headers={"Content-Type": "application/json"})
        self.response = self.conn.getresponse()
        assert self.response.status == 200

    def next_event(self) -> dict | None:
        while True:
            line = self.response.readline()
            if not line:
                return None
            if line.startswith(b"data: "):
                return json.loads(line[6:])

    def rest(self) -> list[dict]:
        events = []
        while (event := self.next_event()) is not None:
            events.append(event)
        self.conn.close()
        return events


def interrupt(gateway, request_id, user):
    return gateway.post(f"/v1/streaming_query/interrupt?user_id={user}", {"request_id": request_id})


def test_a_user_stops_their_own_stream(slow):
    gateway, upstream = slow
    stream = Stream(gateway, {"query": "tell me a long story", "no_tools": True}, "ian")
    start = stream.next_event()
    assert start["event"] == "start"
    request_id = start["data"]["request_id"]
    first = stream.next_event()
    assert first["event"] == "token"
    # Someone else cannot stop it.
    other = interrupt(gateway, request_id, "mallory")
    assert other.status == 403 and other.json()["detail"] == {
        "response": "User does not have permission to interrupt this streaming request",
        "cause": f"User mallory does not own streaming request with ID {request_id}"}
    stopped = interrupt(gateway, request_id, "ian")
    assert stopped.ok() == {"request_id": request_id, "interrupted": True, "message": "Streaming request interrupted"}
    rest = stream.rest()
    assert [event["event"] for event in rest][-2:] == ["token", "interrupted"]
    assert rest[-1]["data"] == {"request_id": request_id}
    assert rest[-2]["data"]["token"].endswith("\n\n*Response stopped by the user.*")
    assert not {"turn_complete", "end"} & {event["event"] for event in rest}
    ids = [first["data"]["id"]] + [event["data"]["id"] for event in rest if event["event"] == "token"]
    assert ids == list(range(len(ids)))
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
    # Charged as an abandoned turn (its reservation), not for free.
    wait_until(lambda: gateway.get("/v1/quotas?user_id=ian").ok()["available_quotas"]["daily"] < 100000,
               "the interrupted turn to be charged")
    # Finished now: LCORE's 200 with `interrupted: false`.
    again = interrupt(gateway, request_id, "ian").ok()
    assert again == {"request_id": request_id, "interrupted": False,
                     "message": "Streaming request already completed; nothing to interrupt"}


def test_the_refusals(slow):
    gateway, _ = slow
    unknown = str(uuid.uuid4())
    reply = interrupt(gateway, unknown, "ian")
    assert reply.status == 404 and reply.json()["detail"] == {
        "response": "Streaming Request not found", "cause": f"Streaming Request with ID {unknown} does not exist"}
    reply = interrupt(gateway, "not-an-id", "ian")
    assert reply.status == 422 and reply.json()["detail"][0]["msg"] == "Value error, Improper request ID not-an-id"
    reply = gateway.post("/v1/streaming_query/interrupt?user_id=ian", {})
    assert reply.status == 422 and reply.json()["detail"][0]["type"] == "missing"
    reply = gateway.post("/v1/streaming_query/interrupt?user_id=ian", {"request_id": unknown, "x": 1})
    assert reply.status == 422 and reply.json()["detail"][0]["type"] == "extra_forbidden"


@pytest.fixture(scope="module")
def replicas(upstream_with, gateway_factory, postgres):
    """Two replicas on one PostgreSQL, in front of the slow upstream."""
    upstream = upstream_with("--delay-ms", "150")
    keys = postgres.new_database(namespace="lightspeed-stack")
    return gateway_factory(upstream.url, database={"postgres": keys}), \
        gateway_factory(upstream.url, database={"postgres": keys}), upstream


def test_an_interrupt_reaches_the_replica_that_runs_the_stream(replicas):
    runner, other, upstream = replicas
    stream = Stream(runner, {"query": "tell me a long story", "no_tools": True}, "pat")
    request_id = stream.next_event()["data"]["request_id"]
    assert stream.next_event()["event"] == "token"
    assert interrupt(other, request_id, "mallory").status == 403
    started = time.monotonic()
    stopped = interrupt(other, request_id, "pat")
    latency = time.monotonic() - started
    assert stopped.ok() == {"request_id": request_id, "interrupted": True, "message": "Streaming request interrupted"}
    rest = stream.rest()
    assert [event["event"] for event in rest][-2:] == ["token", "interrupted"]
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
    assert interrupt(other, request_id, "pat").ok() == {
        "request_id": request_id, "interrupted": False,
        "message": "Streaming request already completed; nothing to interrupt"}
    unknown = interrupt(other, str(uuid.uuid4()), "pat")   # asked every replica, none has it
    assert unknown.status == 404
    print(f"cross-replica interrupt answered in {latency * 1000:.1f} ms")
    assert latency < 1.0


def test_the_partial_answer_is_kept_and_the_conversation_goes_on(slow):
    gateway, upstream = slow
    stream = Stream(gateway, {"query": "tell me a long story", "no_tools": True}, "kim")
    start = stream.next_event()["data"]
    assert stream.next_event()["event"] == "token"
    assert interrupt(gateway, start["request_id"], "kim").ok()["interrupted"] is True
    stream.rest()
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
    # Recorded before the next request of this conversation is prepared (it waits for it).
    later = gateway.post("/v1/query?user_id=kim", {"query": "go on", "no_tools": True,
                                                   "conversation_id": start["conversation_id"]}).ok()
    # The upstream conversation holds the question and the partial answer.
    assert later["response"].startswith("Scripted reply (turn 2, 3 messages): go on"), later


@pytest.fixture(scope="module")
def slow_engine(upstream_with, gateway_factory, tmp_path_factory):
    """A gateway running turns on the local engine, in front of a Chat Completions
    upstream that waits 150 ms between stream chunks."""
    chat = upstream_with("--no-responses", "--delay-ms", "150")
    quota = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("interrupt-engine-quota") / "q.db")},
             "limiters": LIMITS}
    return gateway_factory(chat.url, **engine_config(chat.url, quota_handlers=quota)), chat


def test_on_the_local_engine_the_partial_answer_is_saved_and_the_conversation_goes_on(slow_engine):
    gateway, chat = slow_engine
    before = scrape(gateway)
    stream = Stream(gateway, {"query": "tell me a long story", "no_tools": True}, "lee")
    start = stream.next_event()["data"]
    first = stream.next_event()
    assert first["event"] == "token"
    assert interrupt(gateway, start["request_id"], "lee").ok()["interrupted"] is True
    rest = stream.rest()
    assert [event["event"] for event in rest][-2:] == ["token", "interrupted"]
    partial = "".join(event["data"]["token"] for event in [first, *rest[:-2]] if event["event"] == "token")
    assert partial and "stopped by the user" not in partial
    wait_until(lambda: chat.open_streams() == 0, "the upstream stream to be closed")
    after = scrape(gateway)
    # The engine saved the partial response under the id the turn is recorded with.
    stored = gateway.get("/v1/responses?user_id=lee").ok()["data"]
    assert len(stored) == 1, stored
    response = stored[0]
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "interrupted"}
    assert response["output_text"] == partial
    assert gateway.get(f"/v1/responses/{response['id']}?user_id=lee").ok()["output_text"] == partial
    db = GatewayDb.of(gateway)
    db.flush()
    assert db.counts(user_id="lee").turns == 1
    # Charged as an abandoned turn (its reservation): one call, no tokens reported.
    balance = gateway.get("/v1/quotas?user_id=lee").ok()["available_quotas"]["daily"]
    assert balance < 100000
    assert moved(before, after, "gateway_quota_tokens_charged_total", limiter="daily") == 100000 - balance
    assert moved(before, after, "ls_llm_calls_total", endpoint="/v1/streaming_query") == 1
    assert moved(before, after, "ls_llm_token_received_total", endpoint="/v1/streaming_query") == 0
    assert moved(before, after, "gateway_turns_total", mode="stream", outcome="abandoned") == 1
    # The conversation goes on from the partial answer: the model is sent it.
    chat.clear()
    later = gateway.post("/v1/query?user_id=lee", {"query": "go on", "no_tools": True,
                                                   "conversation_id": start["conversation_id"]}).ok()
    assert later["response"].startswith("Scripted reply (turn 2, 3 messages): go on"), later
    messages = chat.last("/v1/chat/completions")["body"]["messages"]
    assert [m["role"] for m in messages if m["role"] != "system"] == ["user", "assistant", "user"]
    assert {"role": "assistant", "content": partial}.items() <= next(
        m for m in messages if m["role"] == "assistant").items()


def test_an_interrupted_turn_leaves_the_items_it_took_in_the_upstreams_conversation(slow):
    """Items added through OpenAI's Conversations API, held for the conversation's next
    turn (issue 41): an interrupted turn that took them appends them to the upstream's
    conversation with its question and partial answer, so the next turn has them."""
    gateway, upstream = slow
    cid = gateway.post("/v1/conversations?user_id=lea", {"items": [
        {"type": "message", "role": "user", "content": "remember the word pineapple"}]}).ok()["id"]
    stream = Stream(gateway, {"query": "tell me a long story", "no_tools": True, "conversation_id": cid}, "lea")
    start = stream.next_event()["data"]
    assert stream.next_event()["event"] == "token"
    assert interrupt(gateway, start["request_id"], "lea").ok()["interrupted"] is True
    stream.rest()
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
    later = gateway.post("/v1/query?user_id=lea", {"query": "go on", "no_tools": True, "conversation_id": cid}).ok()
    # The held item, the question, the partial answer, then this question.
    assert "4 messages): go on" in later["response"], later
    items = gateway.get(f"/v1/conversations/{cid}/items?order=asc&user_id=lea").ok()["data"]
    assert "pineapple" in json.dumps(items[0])
