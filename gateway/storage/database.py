"""One async database API, two engines (docs/architecture.md, "Storage: one API,
two engines").

SQL is written once, portable between SQLite and PostgreSQL, with `:name` or `?`
parameters; each engine runs it (`sqlite.py`: one worker thread of its own;
`postgres.py`: asyncpg, which numbers the parameters). The repositories only see this
API: `fetchone`/`fetchall`, `execute`, `write` (a batch of statements as one
transaction) and `transaction()` (statements that depend on what they read).

Portable SQL here means: no `NOT <integer>` (`deleted = 0`), no SQL clock functions
(times are ISO-8601 UTC text made in Python), `INSERT … ON CONFLICT … DO UPDATE` with
`excluded`, no engine-specific types (TEXT and INTEGER only).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from gateway.storage.migrations import BASELINE, LEGACY_BOOKKEEPING, MIGRATIONS

Row = Mapping[str, Any]
Params = Mapping[str, Any] | Sequence[Any]

# Begins a statement of `Database.write` that neither reads what the statement before it
# writes nor writes what it reads (a batch's quota charge after the turns' records): on
# PostgreSQL the two may then go as one statement, one round trip instead of two. A
# comment, so SQLite runs it as it is.
SHARES_TRIP = "/* independent of the statement before it */ "


def committed(done: asyncio.Future[Any], error: BaseException | None) -> None:
    """Tell a group commit's waiter how its write went (a waiter that gave up is left
    alone). A failure is logged by the committer, so it is marked retrieved here: the
    waiter still gets it, and nothing logs it again at garbage collection."""
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
        done.exception()


class DatabaseUnavailable(Exception):
    """The database cannot be reached or refused the connection (message has no secret)."""


class Transaction(ABC):
    """Statements inside `Database.transaction()`."""

    @abstractmethod
    async def execute(self, sql: str, params: Params = ()) -> int: ...

    @abstractmethod
    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None


class Database(ABC):
    # True when other processes may write the same database (several replicas on one
    # PostgreSQL, or worker processes on one SQLite file: `sharing.py`): caches of rows
    # that change cannot be trusted, and write batches lock the conversation rows they
    # number turns from.
    shared: bool = False
    dialect: str = "sqlite"   # or "postgresql": where a module must write its SQL twice

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement in a transaction of its own; the number of rows it changed."""

    @abstractmethod
    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    @abstractmethod
    async def write(self, statements: Sequence[tuple[str, Params]]) -> list[Row]:
        """Run the statements as one write transaction (in one trip where the engine can);
        the rows their RETURNING clauses gave (PostgreSQL; SQLite's statements have none)."""

    @abstractmethod
    async def now(self) -> datetime:
        """The database's clock (UTC): `SELECT now()` on PostgreSQL, so replicas agree;
        the process clock for embedded SQLite, whose only writer is this process."""

    @abstractmethod
    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """A write transaction whose statements depend on what it reads."""

    def pool_use(self) -> tuple[int, int, int] | None:
        """Connections (in use, idle, the most there can be); None: no pool (SQLite)."""
        return None

    @abstractmethod
    async def ping(self) -> None:
        """Prove the database can take a write now (readiness); raise if it cannot."""

    async def _lock_migrations(self, tx: Transaction) -> None:
        """Keep other processes out of the migration until this transaction ends."""

    @abstractmethod
    async def _has_table(self, tx: Transaction, name: str) -> bool: ...

    async def migrate(self) -> None:
        """Bring the schema to the latest version, in one transaction.

        A new database gets the current schema at once (`BASELINE`), recorded as every
        version; an existing one gets the migrations it lacks, in order."""
        async with self.transaction() as tx:
            await self._lock_migrations(tx)
            await tx.execute("CREATE TABLE IF NOT EXISTS gateway_migrations "
                             "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
            applied = {row["version"] for row in await tx.fetchall("SELECT version FROM gateway_migrations")}
            if not applied and await self._has_table(tx, LEGACY_BOOKKEEPING):
                # A SQLite file from before the tables were renamed: its versions so far.
                applied = {row["version"] for row in await tx.fetchall(f"SELECT version FROM {LEGACY_BOOKKEEPING}")}
                await tx.execute(f"DROP TABLE {LEGACY_BOOKKEEPING}")
                for version in sorted(applied):
                    await _record(tx, version)
            if not applied:
                for statement in BASELINE:
                    await tx.execute(statement)
                for version, _ in MIGRATIONS:
                    await _record(tx, version)
                return
            for version, statements in MIGRATIONS:
                if version not in applied:
                    for statement in statements:
                        await tx.execute(statement)
                    await _record(tx, version)


async def _record(tx: Transaction, version: int) -> None:
    await tx.execute("INSERT INTO gateway_migrations (version, applied_at) VALUES (:v, :at)",
                     {"v": version, "at": datetime.now(timezone.utc).isoformat()})

