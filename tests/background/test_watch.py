"""A start-up after a crash, on both engines: what a stopped gateway left unfinished
is failed with its recorded output and a terminal event appended; what has ended, or
runs on a live replica, is left alone."""

from __future__ import annotations

import orjson

from gateway.background.watch import fail_stale
from gateway.storage.background_responses import BackgroundStore, now_ms
from gateway.storage.open import open_database
from gateway.streaming.progress import events
from tests.background.test_runs import BATCH, CREATED
from tests.storage.conftest import database_config  # noqa: F401  (the fixture: both engines)


async def test_fail_stale(database_config):  # noqa: F811
    db = await open_database(database_config)
    store = BackgroundStore(db)
    await store.create(CREATED, "alice", "gone", BATCH, 4)  # BATCH is resp_1's stream
    for response_id in ("resp_live", "resp_done"):
        await store.create({**CREATED, "id": response_id}, "alice", "gone", b"", 0)
    await store.finish({**CREATED, "id": "resp_done", "status": "completed"}, 4, b"", 0)
    await db.execute("UPDATE gateway_background SET updated_at = 0 WHERE id <> 'resp_live'")
    assert await fail_stale(store, now_ms() - 30_000) == 1
    row = await store.get("resp_1", "alice")
    assert row.status == "failed" and row.response["output_text"] == "Half an ans"
    assert row.response["error"]["code"] == "server_error"
    stored = [event for _, frames in await store.frames_after("resp_1", -1) for event in events(frames)]
    assert [event["sequence_number"] for event in stored] == [0, 1, 2, 3, 4]
    assert stored[-1]["type"] == "response.failed" and stored[-1]["response"] == orjson.loads(
        orjson.dumps(row.response))
    assert (await store.get("resp_live", "alice")).running  # its runner was heard of just now
    assert (await store.get("resp_done", "alice")).status == "completed"
    assert await fail_stale(store, None) == 1  # one process (SQLite): everything unfinished
    await db.close()
