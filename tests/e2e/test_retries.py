"""Retries only when safe (issue 42), through `gateway serve` and a fault-injecting relay
in front of the scripted upstream (tests/support/fault_relay.py): a 503 or 429 is asked
again (after its `Retry-After`), for a turn's POST too; a 502 is asked again only for an
idempotent request, never for a turn's POST (the upstream may have run it); a
`Retry-After` beyond `retry_budget_seconds` is not waited for; a stream that started and
then broke is never sent again."""

from __future__ import annotations

import time

import pytest

from tests.support.fault_relay import FaultRelay

TURN = {"input": "hello", "tool_choice": "none"}
TURNS = "POST /v1/responses"


@pytest.fixture(scope="module")
def relay(upstream):
    relay = FaultRelay(upstream.url)
    yield relay
    relay.close()


@pytest.fixture(scope="module")
def retrying(gateway_factory, relay):
    gateway = gateway_factory(relay.url, llama_stack={"max_retries": 2, "retry_delay": 0.05,
                                                      "retry_budget_seconds": 3, "api": "responses",
                                                      "conversations": "gateway"})
    assert gateway.post("/v1/responses", TURN).status == 200   # the model catalog read, cached
    return gateway


@pytest.fixture(autouse=True)
def clean(relay):
    relay.faults.clear()
    relay.hits.clear()


def test_a_503_with_retry_after_is_asked_again_after_it(retrying, relay):
    relay.faults[:] = [(503, {"Retry-After": "1"})]
    started = time.monotonic()
    reply = retrying.post("/v1/responses", TURN)
    assert reply.status == 200, reply.body
    assert time.monotonic() - started >= 1
    assert relay.hits[TURNS] == 2


def test_a_429_and_a_503_without_retry_after_are_asked_again_a_stream_too(retrying, relay):
    relay.faults[:] = [(429, {}), (503, {})]
    status, frames = retrying.stream(TURN)
    assert status == 200 and frames[-2][0] == "response.completed", frames[-2:]
    assert relay.hits[TURNS] == 3


def test_a_502_is_not_asked_again_for_a_turn_but_is_for_an_idempotent_read(retrying, relay):
    relay.faults[:] = [(502, {})]
    assert retrying.post("/v1/responses", TURN).status == 500
    assert relay.hits[TURNS] == 1
    relay.faults[:] = [(502, {}), (504, {})]
    models = retrying.get("/v1/models")
    assert models.status == 200, models.body
    assert relay.hits["GET /v1/models"] == 3


def test_retries_stop_at_max_retries_and_at_the_budget(retrying, relay):
    relay.faults[:] = [(503, {})] * 3
    assert retrying.post("/v1/responses", TURN).status == 500
    assert relay.hits[TURNS] == 3   # the first attempt and max_retries: 2
    relay.hits.clear()
    relay.faults[:] = [(503, {"Retry-After": "30"})]
    started = time.monotonic()
    assert retrying.post("/v1/responses", TURN).status == 500
    assert time.monotonic() - started < 2   # 30 s is past retry_budget_seconds: 3, not waited for
    assert relay.hits[TURNS] == 1


def test_a_stream_that_started_and_broke_is_never_sent_again(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, llama_stack={"max_retries": 2, "retry_delay": 0.05})
    upstream.clear()
    status, frames = gateway.stream({"input": "please break-stream", "tool_choice": "none"})
    assert status == 200
    assert [event for event, _ in frames if event][-1] == "response.failed"
    assert len([r for r in upstream.requests("/v1/responses") if r["method"] == "POST"]) == 1
