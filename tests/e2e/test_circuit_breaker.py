"""The upstream's circuit breaker (issue 42), through `gateway serve`: a relay in front
of the scripted upstream (tests/support/fault_relay.py) answers 503 while "down" and
counts what reaches it.
After `circuit_breaker_failures` failing turns the circuit opens: a turn is refused with
LCORE's 503 in under 100 ms without reaching the upstream, `/readiness` and `/metrics`
say so, a log line too; after the cooldown one turn probes, and its answer closes it."""

from __future__ import annotations

import time

import pytest

from tests.support.fault_relay import FaultRelay

TURN = {"input": "hello", "tool_choice": "none"}


@pytest.fixture
def switch(upstream):
    relay = FaultRelay(upstream.url)
    yield relay
    relay.close()


def circuit_state(gateway) -> float:
    text = gateway.get("/metrics").body.decode()
    line = next(line for line in text.splitlines() if line.startswith("gateway_upstream_circuit_state{"))
    return float(line.rsplit(" ", 1)[1])


def test_the_circuit_opens_refuses_at_once_and_a_probe_closes_it(gateway_factory, switch):
    gateway = gateway_factory(switch.url, llama_stack={"circuit_breaker_failures": 2,
                                                       "circuit_breaker_cooldown_seconds": 2,
                                                       "api": "responses", "conversations": "gateway"})
    assert gateway.post("/v1/responses", TURN).status == 200
    assert circuit_state(gateway) == 0
    switch.down = True
    for _ in range(2):
        assert gateway.post("/v1/responses", TURN).status == 500   # the upstream's 503, relayed as LCORE does
    hits = sum(switch.hits.values())
    started = time.perf_counter()
    refused = gateway.post("/v1/responses", TURN)
    elapsed = time.perf_counter() - started
    assert refused.status == 503, refused.body
    assert refused.json()["detail"] == {"response": "Unable to connect to Llama Stack", "cause": "Connection error."}
    assert elapsed < 0.1, elapsed
    assert sum(switch.hits.values()) == hits   # the upstream was not touched
    ready = gateway.get("/readiness")
    assert ready.status == 503 and "circuit breaker open" in ready.json()["reason"]
    assert sum(switch.hits.values()) == hits
    assert circuit_state(gateway) == 2
    # Back up: after the cooldown one turn probes, and closes the circuit.
    switch.down = False
    time.sleep(2.1)
    assert gateway.post("/v1/responses", TURN).status == 200
    assert circuit_state(gateway) == 0
    assert gateway.get("/readiness").status == 200
    log = gateway.messages()
    assert "circuit closed -> open" in log and "circuit half_open -> closed" in log
