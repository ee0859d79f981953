"""The SQLite engine's writes on the event loop's own connection (`storage/sqlite.py`):
another process holding the write lock sends them to the worker thread, which waits for
it, and the worker checkpoints the WAL the loop's connection never does."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

from gateway.storage import sqlite as engine
from gateway.storage.sqlite import SQLiteDatabase

_CREATE = "CREATE TABLE gateway_t (id INTEGER PRIMARY KEY, v TEXT)"


async def test_a_write_while_another_process_holds_the_lock_waits_for_it(tmp_path):
    path = str(tmp_path / "g.db")
    db = await SQLiteDatabase.open(path)
    await db.execute(_CREATE)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)   # another process's
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO gateway_t (id, v) VALUES (1, 'theirs')")
    # Released 0.3 s later, from elsewhere: the event loop must stay free meanwhile.
    releasing = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    releasing.start()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
    ticking = asyncio.ensure_future(tick())
    await db.write([("INSERT INTO gateway_t (id, v) VALUES (2, 'ours')", ())])
    ticking.cancel()
    releasing.join()
    assert ticks >= 10   # the loop ran while the write waited (in the worker thread)
    assert await db.fetchall("SELECT id, v FROM gateway_t ORDER BY id") == [{"id": 1, "v": "theirs"},
                                                                            {"id": 2, "v": "ours"}]
    other.close()
    await db.close()


async def test_the_worker_checkpoints_what_the_loops_connection_wrote(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "_CHECKPOINT_CHANGES", 50)
    path = tmp_path / "g.db"
    db = await SQLiteDatabase.open(str(path))
    await db.execute(_CREATE)
    for start in range(0, 200, 10):
        await db.write([("INSERT INTO gateway_t (id, v) VALUES (?, ?)", (i, "x" * 500)) for i in range(start, start + 10)])
    await asyncio.sleep(0.2)
    # Checkpointed: the rows (100 KB) are in the database file itself, not only in the
    # WAL (nothing else checkpointed: the loop's connection never does, and the worker's
    # own commits were one table's creation).
    assert path.stat().st_size > 50_000
    assert db._checkpoint_at > 200   # noqa: SLF001  (the next one is scheduled)
    assert len(await db.fetchall("SELECT id FROM gateway_t")) == 200
    await db.close()
