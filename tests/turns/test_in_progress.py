"""Turns running per user: past the limit a 429 (or the transport's own refusal) before
anything is counted; leaving frees the place. Processes sharing a database lease their
places there (`SharedInProgress`, over a fake store; the SQL on both engines:
tests/storage/test_running_turns.py; through `gateway serve`:
tests/e2e/test_shared_processes.py)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.schema.errors import ApiError
from gateway.turns.in_progress import InProgress, SharedInProgress


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


class Store:
    """A database's places: per process, and the limit checked over all of them."""

    def __init__(self, held_elsewhere: int = 0):
        self.elsewhere = held_elsewhere
        self.mine = 0
        self.asked = 0
        self.returned: list[list[tuple[str, int]]] = []
        self.forgotten = False

    async def lease(self, user_id, more, limit, now_ms, expires_ms):
        self.asked += 1
        await asyncio.sleep(0)
        if self.elsewhere + self.mine + more > limit:
            return self.elsewhere + self.mine
        self.mine += more
        return None

    async def give_back(self, returned, expires_ms):
        self.returned.append(returned)
        self.mine -= sum(count for _, count in returned)

    async def sweep(self, now_ms):
        return 0

    async def forget(self):
        self.forgotten = True


async def test_processes_sharing_a_database_lease_places_and_admit_from_them():
    store = Store(held_elsewhere=1)
    running = SharedInProgress(3, store)   # type: ignore[arg-type]
    for _ in range(2):
        waiting = running.enter("ann")
        assert waiting is not None   # past this process's places: the database decides
        await waiting
    assert store.mine == 2 and store.asked == 2
    with pytest.raises(ApiError) as refused:
        await running.enter("ann")   # another process holds the third place
    assert refused.value.cause == "User ann has 3 responses in progress (limit 3)"
    assert running.running("ann") == 2 and running._leased == {"ann": 2}   # the refused turn is not counted
    running.leave("ann")
    assert running.enter("ann") is None   # its place is still leased: no database
    running.leave("ann")
    running.leave("ann")
    await running.give_back()   # both were used since the last give-back: kept
    assert store.returned[-1] == [] and running._leased == {"ann": 2}
    await running.give_back()   # unused for a whole period: given back
    assert store.returned[-1] == [("ann", 2)] and store.mine == 0 and running._leased == {}
    await running.close()
    assert store.forgotten


async def test_a_failed_give_back_keeps_the_places_counted():
    store = Store()
    running = SharedInProgress(2, store)   # type: ignore[arg-type]
    await running.enter("ann")
    running.leave("ann")
    await running.give_back()   # used in this period: kept

    async def down(returned, expires_ms):
        raise OSError("database down")
    store.give_back = down   # type: ignore[method-assign]
    with pytest.raises(OSError):
        await running.give_back()
    assert running._leased == {"ann": 1}   # still held in the database: given back next time


async def test_without_the_database_the_process_count_decides():
    store = Store()
    running = SharedInProgress(2, store)   # type: ignore[arg-type]

    async def down(*args):
        raise OSError("database down")
    store.lease = down   # type: ignore[method-assign]
    await running.enter("ann")   # admitted on this process's count, no place leased
    await running.enter("ann")
    assert running.running("ann") == 2 and running._leased == {}
    with pytest.raises(ApiError):
        running.enter("ann")   # past the limit here alone


async def test_a_cancelled_lease_counts_nothing():
    store = Store()
    running = SharedInProgress(2, store)   # type: ignore[arg-type]
    waiting = asyncio.ensure_future(running.enter("ann"))   # type: ignore[arg-type]
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert running.running("ann") == 0 and running._leased == {}
