"""The SQLite engine of the database API (`database.py`).

SQLite is the embedded default: one connection, used only by one worker thread, so the
event loop never waits for the disk. Every call is one trip to that thread (a trip costs tens of
microseconds of CPU in hand-offs, more than most statements), which is why reads fetch
in the same trip and `write()` runs a whole write transaction in one. A transaction
that spans several awaits (`transaction()`) holds a lock, so no other coroutine's
statement can land inside it.

`write()` (the turn writer's group commits) runs on the event loop's own connection
instead, without the trip: with WAL and `synchronous=NORMAL` a commit writes to the
WAL and never waits for the disk, so the loop runs it as fast as the thread would, and
the turn is spared the hand-off both ways (a wake-up of the thread, then of the loop;
counted: see `_INLINE_PRAGMAS`). That connection never waits for a lock either
(`busy_timeout=0`): when another process holds the database's write lock (replicas or
workers on one file), the write goes to the worker thread, whose connection waits for
it as before. It never checkpoints (a checkpoint syncs the disk): the worker thread
does, every `_CHECKPOINT_CHANGES` rows it wrote.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Sequence, TypeVar

from gateway.storage import database
from gateway.storage.database import Params, Row

Result = TypeVar("Result")

log = logging.getLogger("gateway.storage")

# WAL lets readers proceed during a write; NORMAL sync is durable across process
# crashes (only an OS crash can lose the last commits). The busy timeout bounds how long
# a write waits for another process's lock before it fails (and readiness reports the
# database unavailable). 2 KiB pages (a new file only; an existing one keeps its size):
# every turn dirties a few random B-tree pages (ids are random), and each goes to the
# WAL whole, so smaller pages cost SQLite ~20 % less CPU per turn. A checkpoint every
# 10,000 pages (20 MiB of WAL) instead of 1,000: checkpoints copy pages back and sync,
# and less often they copy a page changed many times once (-20 % CPU per turn at 60,000
# conversations). Both measured with scripts over the turn writer's statements.
_PRAGMAS = ("page_size=2048", "journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=2000",
            "wal_autocheckpoint=10000")
# The event loop's connection for `write()`: the same, but it never waits for another
# process's lock (the worker thread's connection does) and never checkpoints. Counted
# (`python -m bench.callgrind --only json,lone`, beside the thread's version): a JSON
# turn 1,083k -> 1,067k instructions 32 at a time, 1,304k -> 1,158k alone.
_INLINE_PRAGMAS = ("synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=0", "wal_autocheckpoint=0")
# A passive checkpoint on the worker thread once the loop's connection wrote this many
# rows: a few pages each, so about the worker connection's own 10,000-page threshold.
_CHECKPOINT_CHANGES = 4000


def _null(value: None) -> None:
    return None


# speed: sqlite3 binds int, float, str and bytearray as they are and hands every other
# parameter to its adaptation protocol, which for None (SQL NULL) looks for `__adapt__`
# on its protocol class and fails with a formatted AttributeError; a registered adapter
# is found first: ~1.9k instructions fewer a None, a few a turn (bench/README.md "The hot
# path's tricks"). Plain version: no adapter (delete this line and `_null`).
sqlite3.register_adapter(type(None), _null)


class SQLiteDatabase(database.Database):
    def __init__(self, connection: sqlite3.Connection, worker: ThreadPoolExecutor):
        self._conn = connection
        self._worker = worker
        self._lock = asyncio.Lock()
        # The event loop's connection for `write()` (None: every write goes to the worker).
        self._inline: sqlite3.Connection | None = None
        self._checkpoint_at = _CHECKPOINT_CHANGES   # its `total_changes` due for a checkpoint
        self._checkpointing: asyncio.Future[Any] | None = None

    @classmethod
    async def open(cls, path: str) -> "SQLiteDatabase":
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            for pragma in _PRAGMAS:
                conn.execute(f"PRAGMA {pragma}")
            return conn

        db = cls(await asyncio.get_running_loop().run_in_executor(worker, connect), worker)
        await db.migrate()
        if path != ":memory:":   # another connection to ":memory:" would be another database
            db._inline = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            for pragma in _INLINE_PRAGMAS:
                db._inline.execute(f"PRAGMA {pragma}")
        return db

    async def close(self) -> None:
        async with self._lock:
            if self._checkpointing is not None:
                await asyncio.gather(self._checkpointing, return_exceptions=True)
            if self._inline is not None:
                self._inline.close()
                self._inline = None
            await self._run(self._conn.close)
        self._worker.shutdown(wait=True)

    async def _has_table(self, tx: database.Transaction, name: str) -> bool:
        return await tx.fetchone("SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = :name",
                                 {"name": name}) is not None

    async def ping(self) -> None:
        """Prove the database can take a write now (readiness): take the write lock."""
        async with self.transaction() as tx:
            await tx.fetchone("SELECT COUNT(*) AS n FROM gateway_migrations")

    async def execute(self, sql: str, params: Params = ()) -> int:
        async with self._lock:
            return await self._run(_execute, self._conn, sql, params)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        async with self._lock:
            return await self._run(_fetchall, self._conn, sql, params)

    async def write(self, statements: Sequence[tuple[str, Params]]) -> list[Row]:
        """Run the statements as one write transaction: on the event loop's connection,
        or in one trip to the worker when another process holds the write lock."""
        async with self._lock:
            # speed: the loop's own connection, no trip to the worker thread (~100-150k
            # instructions fewer a lone turn, bench/README.md "The turn's cost (issue 43)").
            # Plain version: `await self._run(_write, self._conn, statements)` alone.
            inline = self._inline
            if inline is not None:
                try:
                    _write(inline, statements)
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                        raise
                else:
                    if inline.total_changes >= self._checkpoint_at:
                        self._checkpoint(inline.total_changes)
                    return []
            await self._run(_write, self._conn, statements)
        return []

    def _checkpoint(self, changes: int) -> None:
        """A passive checkpoint on the worker thread (the loop's connection never makes
        one): it copies what the WAL holds back into the database without waiting for
        anyone, so the WAL starts over."""
        self._checkpoint_at = changes + _CHECKPOINT_CHANGES
        if self._checkpointing is None or self._checkpointing.done():
            self._checkpointing = self._run(_execute, self._conn, "PRAGMA wal_checkpoint(PASSIVE)", ())
            self._checkpointing.add_done_callback(_checkpointed)

    async def now(self) -> datetime:
        return datetime.now(timezone.utc)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[database.Transaction]:
        """A write transaction whose statements depend on what it reads (a trip each)."""
        async with self._lock:
            await self._run(self._conn.execute, "BEGIN IMMEDIATE")
            try:
                yield _Transaction(self)
            except BaseException:
                await self._run(self._conn.execute, "ROLLBACK")
                raise
            await self._run(self._conn.execute, "COMMIT")

    def _run(self, fn: Callable[..., Result], *args: Any) -> "asyncio.Future[Result]":
        return asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)


class _Transaction(database.Transaction):
    """Statements inside `SQLiteDatabase.transaction()`; the lock is already held."""

    def __init__(self, db: SQLiteDatabase):
        self._db = db

    async def execute(self, sql: str, params: Params = ()) -> int:
        return await self._db._run(_execute, self._db._conn, sql, params)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return await self._db._run(_fetchall, self._db._conn, sql, params)


def _checkpointed(done: "asyncio.Future[Any]") -> None:
    if not done.cancelled() and done.exception() is not None:   # the next one will try again
        log.warning("a WAL checkpoint failed: %s", done.exception())


# What runs in the worker thread.

def _execute(conn: sqlite3.Connection, sql: str, params: Params) -> int:
    return conn.execute(sql, params).rowcount


def _fetchall(conn: sqlite3.Connection, sql: str, params: Params) -> list[Row]:
    return [dict(row) for row in conn.execute(sql, params).fetchall()]


def _write(conn: sqlite3.Connection, statements: Sequence[tuple[str, Params]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            conn.execute(sql, params)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
