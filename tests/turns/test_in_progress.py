"""Turns running per user in this process: past the limit a 429 (or the transport's own
refusal) before anything is counted; leaving frees the place."""

from __future__ import annotations

import pytest

from gateway.schema.errors import ApiError
from gateway.turns.in_progress import InProgress


def test_a_user_past_the_limit_is_refused_and_others_are_not():
    running = InProgress(2)
    running.enter("ann")
    running.enter("ann")
    with pytest.raises(ApiError) as refused:
        running.enter("ann")
    assert refused.value.status == 429
    assert running.running("ann") == 2   # the refused turn was not counted
    running.enter("bo")
    assert running.running("bo") == 1


def test_leaving_frees_a_place_and_forgets_idle_users():
    running = InProgress(1)
    running.enter("ann")
    running.leave("ann")
    assert running.running("ann") == 0 and running._by_user == {}
    running.enter("ann")   # the place is free again
    running.leave("ann")
    running.leave("ann")   # an extra leave never goes below zero
    assert running.running("ann") == 0 and running._by_user == {}


def test_the_refusal_is_the_callers():
    def sockets(user: str, running: int, limit: int) -> ApiError:
        return ApiError(429, "Too many sockets", f"{user}: {running} of {limit}", code="too_many_sockets")

    running = InProgress(1, sockets)
    running.enter("ann")
    with pytest.raises(ApiError) as refused:
        running.enter("ann")
    assert refused.value.code == "too_many_sockets" and refused.value.cause == "ann: 1 of 1"
