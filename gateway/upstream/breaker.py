"""A circuit breaker for one upstream base URL (sans I/O): after a run of
`llama_stack.circuit_breaker_failures` failures in a row (no connection, no answer in
time, or a 502/503/504), requests are refused at once, without touching the upstream,
for `circuit_breaker_cooldown_seconds`; then one request goes through as a probe
(half-open): an answer closes the circuit, a failure opens it for another cooldown.

An upstream that is down then costs each turn microseconds instead of a connect timeout
and the retries, and the upstream coming back is not met by every queued turn at once.
`UpstreamClient.open()` asks it before each exchange and tells it how each ended; the
request path reads one attribute when the circuit is closed and nothing failed."""

from __future__ import annotations

import logging
import time
from typing import Callable

log = logging.getLogger("gateway.upstream")

CLOSED, HALF_OPEN, OPEN = "closed", "half_open", "open"
# `gateway_upstream_circuit_state`'s value for each state.
STATE_VALUES = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}
# The statuses that count as the upstream failing (not as a request it refused).
FAILING_STATUSES = frozenset({502, 503, 504})
# An engine provider's circuit when nothing else is said (LlamaStackConfig's defaults).
DEFAULT_CIRCUIT = (5, 10.0)


class CircuitBreaker:
    __slots__ = ("url", "threshold", "cooldown", "state", "failures", "opened_at", "probing", "_clock")

    def __init__(self, url: str, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic):
        self.url = url
        self.threshold = threshold
        self.cooldown = cooldown
        self.state = CLOSED
        self.failures = 0          # in a row
        self.opened_at = 0.0
        self.probing: float | None = None   # half-open: when the probe went (None: none on its way)
        self._clock = clock

    def allow(self) -> bool:
        """Whether a request may go to the upstream now (called when not closed)."""
        if self.state == CLOSED:
            return True
        if self.state == OPEN:
            if self._clock() - self.opened_at < self.cooldown:
                return False
            self._change(HALF_OPEN, "the cooldown is over: the next request is a probe")
        now = self._clock()
        if self.probing is not None and now - self.probing < self.cooldown:
            return False   # one probe at a time; the others are refused until it answers
        self.probing = now   # (a probe not heard of for a cooldown is taken as lost)
        return True

    def retry_in(self) -> float:
        """Seconds until an open circuit lets a probe through."""
        return max(0.0, self.opened_at + self.cooldown - self._clock()) if self.state == OPEN else 0.0

    def succeeded(self) -> None:
        """The upstream answered (any status but 502/503/504)."""
        self.failures = 0
        self.probing = None
        if self.state != CLOSED:
            self._change(CLOSED, "the upstream answered")

    def failed(self, reason: str) -> None:
        """No connection, no answer in time, or 502/503/504."""
        self.failures += 1
        self.probing = None
        if self.state == HALF_OPEN or (self.state == CLOSED and self.failures >= self.threshold):
            self.opened_at = self._clock()
            self._change(OPEN, f"{self.failures} failure(s) in a row, the last: {reason}; requests are refused "
                               f"for {self.cooldown:g} s")
        elif self.state == OPEN:
            self.opened_at = self._clock()

    def released(self) -> None:
        """A probe that ended without an answer either way (its caller went away)."""
        self.probing = None

    def _change(self, state: str, why: str) -> None:
        log.log(logging.WARNING if state == OPEN else logging.INFO, "upstream %s: circuit %s -> %s (%s)",
                self.url, self.state, state, why)
        self.state = state


def failures(breaker: CircuitBreaker | None) -> int:
    """Its failures in a row, read before a call for `open_circuit()`."""
    return breaker.failures if breaker is not None else 0


def open_circuit(breaker: CircuitBreaker | None, failures_before: int) -> str:
    """What a tool's error output says when `breaker` refused its call ("" when it did
    not): fast, and without the provider's URL. A call that failed counted a failure
    (`failures_before` was read before it); a refused one did not."""
    if breaker is None or breaker.state == CLOSED or breaker.failures != failures_before:
        return ""
    return (f"is failing: not asked (circuit open after {breaker.failures} failure(s) in a row; "
            f"next try in {max(1, round(breaker.retry_in()))} s)")
