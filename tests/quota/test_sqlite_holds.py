"""Quotas on a SQLite file several worker processes share (quota/sqlite_holds.py):
the holds of PostgreSQL with SQLite's statements. Two services on one file (each its
own connection, as two processes) never overspend, spares admit in memory and are
given back, a charge releases what its turn held, the sweep releases a stopped
worker's holds, and a process alone keeps the in-memory ledger."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from gateway.config.database import DatabaseConfig
from gateway.quota.balances import iso
from gateway.quota.postgres_holds import HoldsQuota
from gateway.quota.sqlite_holds import SQLiteHoldsStore
from gateway.quota.sqlite_ledger import LedgerQuota
from gateway.schema.errors import ApiError
from tests.quota.test_batches import rows
from tests.quota import test_service
from tests.quota.test_service import LIMITERS, REQUEST, held, open_service, who


@pytest.fixture
def workers(tmp_path, monkeypatch) -> DatabaseConfig:
    monkeypatch.setenv("GATEWAY_WORKERS", "2")
    return DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "g.db")}})


async def test_workers_use_holds_and_a_process_alone_the_ledger(workers, monkeypatch):
    quota, db = await open_service(workers)
    try:
        assert isinstance(quota, HoldsQuota) and isinstance(quota.store, SQLiteHoldsStore) and db.shared
    finally:
        await quota.close()
        await db.close()
    monkeypatch.delenv("GATEWAY_WORKERS")
    quota, db = await open_service(workers)
    try:
        assert isinstance(quota, LedgerQuota) and not db.shared
    finally:
        await quota.close()
        await db.close()


async def test_concurrent_admission_on_one_worker(workers):
    await test_service.test_concurrent_admission_never_overspends(workers)


async def test_two_workers_with_spares_never_overspend(workers):
    limiters = [LIMITERS[2] | {"initial_quota": 20000}]
    first, db = await open_service(workers, limiters)
    second, other_db = await open_service(workers, limiters)
    admitted = 0

    async def turns(quota, user: str) -> None:
        nonlocal admitted
        for _ in range(20):
            try:
                reservation = await quota.reserve(who(user), REQUEST)
            except ApiError as refused:
                assert refused.status == 429
                await asyncio.sleep(0.005)
                continue
            admitted += 1
            await asyncio.sleep(0.002)
            await quota.write(quota.charge(reservation, 60, 40, "m", "p"))   # all of its 100

    try:
        await asyncio.gather(*(turns(quota, f"u{index}") for index in range(8) for quota in (first, second)))
        assert 0 < admitted and admitted * 100 <= 20000
        assert await first.available("x") == {"cluster": 20000 - admitted * 100}
        assert await second.available("x") == {"cluster": 20000 - admitted * 100}
        await first.give_back_holds()
        await second.give_back_holds()
        assert await held(db) == {} and await rows(db) == {"cluster": 0}
    finally:
        await first.close()
        await second.close()
        await db.close()
        await other_db.close()


async def test_a_spare_admits_in_memory_and_the_period_gives_it_back(workers):
    quota, db = await open_service(workers, [LIMITERS[0] | {"initial_quota": 10 ** 6}])
    try:
        first = await quota.reserve(who("ann"), REQUEST)         # creates the row; alone: no spare
        statements = quota._admissions.statements
        second = await quota.reserve(who("ann"), REQUEST)        # 100, and a spare of 400
        assert quota._admissions.statements == statements + 1
        assert await rows(db) == await held(db) == {"daily": 600}
        more = [await quota.reserve(who("ann"), REQUEST) for _ in range(4)]
        assert quota._admissions.statements == statements + 1   # from the spare, in memory
        for reservation in [first, second, *more]:
            await quota.write(quota.charge(reservation, 30, 7, "m", "p"))
        assert await quota.available("ann") == {"daily": 10 ** 6 - 6 * 37}
        (hold,) = quota._holds.for_pairs(quota.pairs("ann"))
        assert await rows(db) == await held(db) == {"daily": hold.held} and hold.used == 0
        await quota.give_back_holds()
        assert await held(db) == {} and await rows(db) == {"daily": 0}
    finally:
        await quota.close()
        await db.close()


async def test_a_stopped_workers_holds_are_swept(workers):
    limiters = [LIMITERS[0] | {"initial_quota": 10 ** 6}]
    quota, db = await open_service(workers, limiters)
    survivor, other_db = await open_service(workers, limiters)
    try:
        await quota.reserve(who("ann"), REQUEST)
        await quota.reserve(who("ann"), REQUEST)
        assert (await rows(db))["daily"] > 0
        # The worker stops renewing (it died): its rows expire.
        await db.execute("UPDATE gateway_quota_reservations SET expires_at = :t",
                         {"t": iso(quota.now() - timedelta(seconds=1))})
        assert await survivor.store.sweep(survivor.now()) == 1
        assert await held(db) == {} and await rows(db) == {"daily": 0}
        assert await survivor.store.sweep(survivor.now()) == 0
    finally:
        quota._holds.forget_all()   # its rows are gone already
        await quota.close()
        await survivor.close()
        await db.close()
        await other_db.close()
