"""The background-response store, on both engines: creation with the first frames,
batches read back after a sequence number, a final write that only an unfinished
response takes, cancel requests per runner, and stale rows found by their heartbeat."""

from __future__ import annotations

from gateway.storage.background_responses import BackgroundStore, now_ms
from gateway.storage.open import open_database


def frames(first: int, count: int) -> bytes:
    return b"".join(b'event: e\ndata: {"sequence_number":%d}\n\n' % n for n in range(first, first + count))


async def test_create_append_read_back_and_finish_once(database_config):
    db = await open_database(database_config)
    store = BackgroundStore(db)
    await store.create({"id": "resp_1", "status": "in_progress"}, "alice", "runner-a", frames(0, 2), 2)
    await store.append("resp_1", 2, frames(2, 3), 3)
    row = await store.get("resp_1", "alice")
    assert row is not None and row.running and row.runner == "runner-a" and not row.cancel_requested
    assert await store.get("resp_1", "bob") is None
    assert await store.frames_after("resp_1", -1) == [(0, frames(0, 2)), (2, frames(2, 3))]
    assert await store.frames_after("resp_1", 1) == [(2, frames(2, 3))]
    assert await store.frames_after("resp_1", 4) == []
    assert await store.last_seq("resp_1") == 4 and await store.last_seq("resp_x") == -1
    assert await store.finish({"id": "resp_1", "status": "completed"}, 5, frames(5, 1), 1) is True
    # Ended: a second end (a stale sweep, another replica's cancel) changes nothing.
    assert await store.finish({"id": "resp_1", "status": "failed"}, 6, frames(6, 1), 1) is False
    row = await store.get("resp_1", "alice")
    assert row.status == "completed" and not row.running and await store.last_seq("resp_1") == 5
    await db.close()


async def test_cancel_requests_heartbeat_and_stale_rows(database_config):
    db = await open_database(database_config)
    store = BackgroundStore(db)
    for response_id, runner in (("resp_a", "one"), ("resp_b", "two")):
        await store.create({"id": response_id, "status": "in_progress"}, "alice", runner, b"", 0)
    await store.request_cancel("resp_a")
    assert await store.cancel_requests("one") == ["resp_a"] and await store.cancel_requests("two") == []
    assert {row.id for row in await store.stale(None)} == {"resp_a", "resp_b"}
    assert await store.stale(now_ms() - 60_000) == []  # both heard of just now
    await db.execute("UPDATE gateway_background SET updated_at = 0")
    await store.heartbeat("one")
    assert [row.id for row in await store.stale(now_ms() - 60_000)] == ["resp_b"]
    await db.close()
