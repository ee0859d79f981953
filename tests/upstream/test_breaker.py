"""The circuit breaker's states, on a clock the test moves."""

from __future__ import annotations

import logging

from gateway.upstream.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, failures, open_circuit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_the_run_of_failures_and_a_success_resets_the_run():
    breaker = CircuitBreaker("http://up:8321", 3, 10, Clock())
    breaker.failed("HTTP 503")
    breaker.failed("HTTP 503")
    breaker.succeeded()
    breaker.failed("HTTP 503")
    breaker.failed("HTTP 503")
    assert breaker.state == CLOSED and breaker.allow()
    breaker.failed("Connection error: refused.")
    assert breaker.state == OPEN and not breaker.allow()


def test_one_probe_after_the_cooldown_closes_it_or_opens_it_again(caplog):
    clock = Clock()
    breaker = CircuitBreaker("http://up:8321", 1, 10, clock)
    with caplog.at_level(logging.INFO, logger="gateway.upstream"):
        breaker.failed("HTTP 502")
        clock.now += 9.9
        assert not breaker.allow() and breaker.retry_in() > 0
        clock.now += 0.2
        assert breaker.allow()                        # the probe
        assert breaker.state == HALF_OPEN
        assert not breaker.allow()                    # the others wait for its verdict
        breaker.failed("HTTP 502")
        assert breaker.state == OPEN and not breaker.allow()   # another cooldown
        clock.now += 10
        assert breaker.allow()
        breaker.succeeded()
        assert breaker.state == CLOSED and breaker.allow() and breaker.failures == 0
    changes = [record.getMessage() for record in caplog.records]
    assert any("circuit closed -> open" in line for line in changes)
    assert any("circuit half_open -> closed" in line for line in changes)


def test_a_lost_probe_lets_another_through_after_a_cooldown():
    clock = Clock()
    breaker = CircuitBreaker("http://up:8321", 1, 5, clock)
    breaker.failed("timeout")
    clock.now += 5
    assert breaker.allow()
    clock.now += 1
    assert not breaker.allow()
    breaker.released()    # its caller left: the next request probes
    assert breaker.allow()
    clock.now += 5        # and one never heard of again is taken as lost
    assert breaker.allow()


def test_a_refusal_is_told_from_the_failure_that_opened_the_circuit():
    now = [0.0]
    breaker = CircuitBreaker("http://search", 1, 10, clock=lambda: now[0])
    before = failures(breaker)
    breaker.failed("refused")            # the call that failed, and opened the circuit
    assert open_circuit(breaker, before) == ""
    before = failures(breaker)
    assert not breaker.allow()           # the next one is refused, nothing counted
    now[0] = 4.2
    assert open_circuit(breaker, before) == ("is failing: not asked (circuit open after 1 failure(s) in a row; "
                                             "next try in 6 s)")
    assert open_circuit(None, 0) == "" and failures(None) == 0
