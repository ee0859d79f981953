"""When an upstream request is tried again, and after how long (sans I/O).

Only before anything reached the client (`UpstreamClient.open()` decides on the
answer's head, before the caller reads a byte of it) and never for a request the
upstream may have executed:

- no connection could be made: nothing was sent, any request is retried;
- 429 and 503: the upstream says it did not take the request (overloaded, rate
  limited), any request is retried, after its `Retry-After` when it sends one;
- 502 and 504: a proxy in front of the upstream lost it, maybe after it began: retried
  only for idempotent methods (a `POST` of a turn or of a conversation is not);
- anything else (a timeout waiting for the head, a stream that started): never.

`llama_stack.max_retries` bounds the attempts, `retry_delay` is the first backoff
(doubling, with jitter: half of it fixed, half random, so callers refused together do
not come back together), and `retry_budget_seconds` the time from the first attempt
within which a retry may still start; a `Retry-After` past it is not waited for.
"""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

RETRIED_STATUSES = frozenset({429, 502, 503, 504})
# Statuses that say the request was not processed: retried whatever its method.
NOT_PROCESSED = frozenset({429, 503})
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def may_retry_status(method: str, status: int) -> bool:
    return status in NOT_PROCESSED or (status in RETRIED_STATUSES and method in IDEMPOTENT)


def backoff(retry_delay: float, attempt: int, rand: float | None = None) -> float:
    """The wait before retry `attempt` (1, 2, …): `retry_delay` doubling, half of it
    jittered."""
    base: float = retry_delay * 2.0 ** (attempt - 1)
    return base / 2 + base / 2 * (random.random() if rand is None else rand)


def retry_after(value: bytes | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date); None when
    absent or unreadable."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def next_wait(retry_delay: float, attempt: int, asked: float | None, left: float) -> float | None:
    """The wait before retry `attempt`, or None when the budget (`left` seconds) does not
    allow it: the upstream's `Retry-After` when it sent one (never shorter than the
    backoff), else the backoff."""
    wait = backoff(retry_delay, attempt)
    if asked is not None:
        wait = max(wait, asked)
    return wait if wait <= left else None
