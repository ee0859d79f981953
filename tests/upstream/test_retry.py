"""What is retried, and after how long (upstream/retry.py)."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from gateway.upstream.retry import backoff, may_retry_status, next_wait, retry_after


@pytest.mark.parametrize(("method", "status", "retried"), [
    ("POST", 503, True), ("POST", 429, True), ("GET", 503, True),
    ("POST", 502, False), ("POST", 504, False),          # the upstream may have run it
    ("GET", 502, True), ("DELETE", 504, True),
    ("POST", 500, False), ("GET", 500, False), ("GET", 404, False), ("POST", 200, False),
])
def test_which_answers_are_retried(method, status, retried):
    assert may_retry_status(method, status) is retried


def test_the_backoff_doubles_with_half_of_it_jittered():
    assert [backoff(0.5, attempt, 0.0) for attempt in (1, 2, 3)] == [0.25, 0.5, 1.0]
    assert [backoff(0.5, attempt, 1.0) for attempt in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert all(0.5 <= backoff(1, 1) <= 1 for _ in range(100))


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after(b"7") == 7.0
    assert retry_after(None) is None and retry_after(b"soon") is None
    assert retry_after(formatdate(1_000_030, usegmt=True).encode(), now=1_000_000) == 30.0
    assert retry_after(formatdate(999_000, usegmt=True).encode(), now=1_000_000) == 0.0


def test_the_wait_honours_retry_after_within_the_budget():
    assert 0.05 <= next_wait(0.1, 1, None, 10) <= 0.1
    assert next_wait(0.1, 1, 3.0, 10) == 3.0
    assert next_wait(0.1, 1, 30.0, 10) is None      # past the budget: not waited for
    assert next_wait(4, 2, None, 3) is None          # the backoff alone is past it
