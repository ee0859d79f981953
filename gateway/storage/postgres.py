"""The PostgreSQL engine of the database API (`database.py`), over asyncpg.

A pool of connections, each with `search_path` set to the configured schema
(`namespace`, quoted: LCORE's names contain `-`), so the repositories' SQL names no
schema. The SQL's `:name` and `?` parameters become asyncpg's `$1…` once per distinct
statement text (cached); asyncpg prepares and caches each statement per connection, and
the repositories' multi-row statements come in a dozen sizes (powers of two), so the
cache holds them all.

Statements run in PostgreSQL's default READ COMMITTED isolation: each statement sees
what was committed before it started, which is what the turn writer relies on after
locking the conversation rows it appends to (`Database.shared`).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from contextlib import asynccontextmanager
from datetime import datetime
from functools import lru_cache
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence, cast

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from gateway.config.database import PostgresConfig, SslMode
from gateway.storage import database
from gateway.storage.database import DatabaseUnavailable, Params, Row

CONNECT_TIMEOUT = 10.0   # seconds to open one connection (start-up, and the pool's reconnects)
PING_TIMEOUT = 5.0       # readiness: a connection and a round trip
POOL_SIZE = 10           # connections per process; concurrent turns share them (group commit)
# pg_advisory_xact_lock's first key: "gway"; the second is the schema's hash, so two
# gateways on different schemas of one database do not wait for each other.
_LOCK_CLASS = 0x67776179


# OperatorInterventionError: the server is shutting down or restarting (57P01-57P03),
# which an open pooled connection learns on its next statement. InternalClientError: a
# pooled connection the server dropped mid-exchange can be left in a protocol state that
# refuses the next statement ("cannot switch to state …"), seen when PostgreSQL stops.
_CONNECTION_LOST = (OSError, asyncio.TimeoutError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
                    asyncpg.CannotConnectNowError, asyncpg.exceptions.OperatorInterventionError,
                    asyncpg.InternalClientError)


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_PARAMETER = re.compile(r"\?|(?<!:):([A-Za-z_][A-Za-z0-9_]*)")


@lru_cache(maxsize=1024)
def _numbered(sql: str) -> tuple[str, tuple[str, ...] | None]:
    """`sql` with `$n` parameters, and the names in order (None: positional `?`)."""
    names: list[str] = []
    positional = False

    def number(match: re.Match[str]) -> str:
        nonlocal positional
        if match.group(1) is None:
            positional = True
            names.append("")
            return f"${len(names)}"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    converted = _PARAMETER.sub(number, sql)
    return converted, None if positional else tuple(names)


def _statement(sql: str, params: Params) -> tuple[str, Sequence[Any]]:
    converted, names = _numbered(sql)
    if names is None or not isinstance(params, dict):
        return converted, list(params)
    return converted, [params[name] for name in names]


def _rowcount(status: str) -> int:
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


def _ssl(config: PostgresConfig) -> SslMode | ssl.SSLContext:
    """libpq's sslmode as asyncpg takes it. With `ca_cert_path`, the modes that use a
    root certificate in libpq (require, verify-ca, verify-full) verify the server's
    certificate against it; verify-full also checks the host name. Without it, asyncpg
    reads libpq's default root certificate (~/.postgresql/root.crt) for the verify modes."""
    if config.ca_cert_path is None or config.ssl_mode in ("disable", "allow", "prefer"):
        return config.ssl_mode
    context = ssl.create_default_context(cafile=str(config.ca_cert_path))
    context.check_hostname = config.ssl_mode == "verify-full"
    return context


class PostgresDatabase(database.Database):
    shared = True
    dialect = "postgresql"

    def __init__(self, pool: asyncpg.Pool, config: PostgresConfig):
        self._pool = pool
        # Connections kept checked out of the pool between statements (see `_connection`).
        self._idle: list[PoolConnectionProxy[asyncpg.Record]] = []
        self._waiting = 0   # callers waiting in the pool's acquire()
        self._config = config

    @classmethod
    async def open(cls, config: PostgresConfig) -> "PostgresDatabase":
        where = f"{config.user}@{config.host}:{config.port}/{config.db}"
        try:
            pool = await asyncpg.create_pool(
                host=config.host, port=config.port, database=config.db, user=config.user,
                password=config.password.get_secret_value(), ssl=_ssl(config), timeout=CONNECT_TIMEOUT,
                min_size=1, max_size=POOL_SIZE, reset=_keep_session,
                server_settings={"search_path": quote_identifier(config.namespace),
                                 "application_name": "gateway"})
        except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise DatabaseUnavailable(f"database.postgres: cannot connect to {where}: "
                                      f"{type(exc).__name__}: {exc}") from None
        db = cls(pool, config)
        try:
            await db.migrate()
        except asyncpg.PostgresError as exc:  # e.g. a user who may not create the schema or tables
            await pool.close()
            raise DatabaseUnavailable(f"database.postgres: migrating schema {quote_identifier(config.namespace)} "
                                      f"of {where} failed: {type(exc).__name__}: {exc}") from None
        except BaseException:
            await pool.close()
            raise
        return db

    async def close(self) -> None:
        while self._idle:
            await self._pool.release(self._idle.pop())
        await self._pool.close()

    async def _lock_migrations(self, tx: database.Transaction) -> None:
        # Replicas starting together queue here; each then finds the schema as the one
        # before it left it. The lock ends with the transaction.
        await tx.execute("SELECT pg_advisory_xact_lock(:class, hashtext(:schema))",
                         {"class": _LOCK_CLASS, "schema": self._config.namespace})
        await tx.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(self._config.namespace)}")

    async def _has_table(self, tx: database.Transaction, name: str) -> bool:
        return await tx.fetchone("SELECT 1 AS found FROM information_schema.tables "
                                 "WHERE table_schema = :schema AND table_name = :name",
                                 {"schema": self._config.namespace, "name": name}) is not None

    def pool_use(self) -> tuple[int, int, int] | None:
        # Connections this database keeps checked out between statements are idle too.
        idle = self._pool.get_idle_size() + len(self._idle)
        return self._pool.get_size() - idle, idle, self._pool.get_max_size()

    async def ping(self) -> None:
        async with asyncio.timeout(PING_TIMEOUT), self._connection() as conn:
            await conn.fetchval("SELECT COUNT(*) FROM gateway_migrations")

    async def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], Awaitable[None]]:
        """Call `callback(payload)` for every NOTIFY on `channel` (one pooled connection
        held for it); returns the coroutine function that stops listening."""
        conn = await self._pool.acquire()

        def received(_conn: object, _pid: int, _channel: str, payload: object) -> None:
            callback(cast(str, payload))   # a NOTIFY payload is text (asyncpg's stubs say object)
        await conn.add_listener(channel, received)

        async def stop() -> None:
            try:
                await conn.remove_listener(channel, received)
            finally:
                await self._pool.release(conn)
        return stop

    async def notify(self, channel: str, payload: str) -> None:
        async with self._connection() as conn:
            await conn.execute("SELECT pg_notify($1, $2)", channel, payload)

    async def execute(self, sql: str, params: Params = ()) -> int:
        async with self._connection() as conn:
            return _rowcount(await conn.execute(*_flat(sql, params)))

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        query, args = _statement(sql, params)
        async with self._connection() as conn:
            return [dict(row) for row in await conn.fetch(query, *args)]

    async def write(self, statements: Sequence[tuple[str, Params]]) -> list[Row]:
        """One transaction; a run of statements with the same text goes as one
        `executemany`, one round trip instead of one each. Returns the rows the other
        statements' RETURNING clauses gave (a batch's quota charge: the balances after it)."""
        rows: list[Row] = []
        async with self._connection() as conn, conn.transaction():
            start = 0
            while start < len(statements):
                end = start + 1
                while end < len(statements) and statements[end][0] == statements[start][0]:
                    end += 1
                if end - start == 1 and _shares_trip(statements, start):
                    rows.extend(dict(row) for row in await conn.fetch(*_together(statements[start], statements[end])))
                    end += 1
                elif end - start == 1:
                    rows.extend(dict(row) for row in await conn.fetch(*_flat(*statements[start])))
                else:
                    query = _numbered(statements[start][0])[0]
                    await conn.executemany(query, [_statement(sql, params)[1] for sql, params in statements[start:end]])
                start = end
        return rows

    async def now(self) -> datetime:
        async with self._connection() as conn:
            now: datetime = await conn.fetchval("SELECT now()")
            return now

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[database.Transaction]:
        async with self._connection() as conn, conn.transaction():
            yield _Transaction(conn)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[PoolConnectionProxy[asyncpg.Record]]:
        """A pooled connection; losing the server (refused, reset, timed out) is
        `DatabaseUnavailable`, which callers answer with LCORE's database error."""
        try:
            # A connection that ended its last use cleanly is reused without going back
            # through asyncpg's pool, whose acquire and release cost ~35 µs of CPU a
            # statement (a proxy object, a shielded release task, wait_for's task). The
            # pool still opens them (at most POOL_SIZE) and gets back any that failed.
            conn: PoolConnectionProxy[asyncpg.Record] | None = None
            while self._idle and conn is None:
                conn = self._idle.pop()
                if conn.is_closed():
                    await self._pool.release(conn)
                    conn = None
            if conn is None:
                self._waiting += 1
                try:
                    conn = await self._pool.acquire(timeout=CONNECT_TIMEOUT)
                finally:
                    self._waiting -= 1
            clean = False
            try:
                yield conn
                clean = not conn.is_closed() and not conn.is_in_transaction()
            finally:
                if clean and not self._waiting:   # else to the pool, where others wait for one
                    self._idle.append(conn)
                else:
                    await self._pool.release(conn)
        except _CONNECTION_LOST as exc:
            raise DatabaseUnavailable(f"PostgreSQL at {self._config.host}:{self._config.port}: "
                                      f"{type(exc).__name__}: {exc}") from None


async def _keep_session(conn: asyncpg.Connection) -> None:
    """What the pool does to a connection given back, besides rolling back a transaction
    left open (asyncpg always does that): nothing. asyncpg's default sends a reset query
    (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`), a round trip per
    release, about as costly as the statement itself; the gateway keeps no session state
    (no session locks, cursors, LISTEN or SET: `search_path` is a start-up setting)."""


def _shares_trip(statements: Sequence[tuple[str, Params]], index: int) -> bool:
    """Whether the statement at `index` can carry the next one (`database.SHARES_TRIP`):
    one of a kind, returning nothing, and the next one alone of its kind too (a run of
    one text goes as an `executemany`)."""
    after = index + 1
    return (after < len(statements) and statements[after][0].startswith(database.SHARES_TRIP)
            and "RETURNING" not in statements[index][0] and statements[index][0] != statements[after][0]
            and (after + 1 == len(statements) or statements[after + 1][0] != statements[after][0]))


def _together(first: tuple[str, Params], second: tuple[str, Params]) -> list[Any]:
    """Two statements as one: the first as a data-modifying CTE of the second (which
    begins with `WITH`); PostgreSQL runs both, in one snapshot (fine: independent)."""
    head, head_args = _statement(*first)
    sql = second[0][len(database.SHARES_TRIP):]
    assert sql.startswith("WITH "), "a statement that shares a trip begins with WITH"
    tail, tail_args = _statement(sql, second[1])
    shifted = re.sub(r"\$(\d+)", lambda match: f"${int(match.group(1)) + len(head_args)}", tail[len("WITH "):])
    return [f"WITH shared_trip AS ({head}), {shifted}", *head_args, *tail_args]


def _flat(sql: str, params: Params) -> list[Any]:
    query, args = _statement(sql, params)
    return [query, *args]


class _Transaction(database.Transaction):
    def __init__(self, conn: PoolConnectionProxy[asyncpg.Record]):
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        return _rowcount(await self._conn.execute(*_flat(sql, params)))

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        query, args = _statement(sql, params)
        return [dict(row) for row in await self._conn.fetch(query, *args)]
