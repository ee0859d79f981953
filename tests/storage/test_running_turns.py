"""The per-user places of running turns leased per process (storage/running_turns.py),
on both engines: leases within the limit across processes, the holders' count when
refused, give-backs and renewals, expired rows ignored and swept, a process's rows
forgotten at shutdown, and concurrent leases never past the limit."""

from __future__ import annotations

import asyncio

from gateway.storage.open import open_database
from gateway.storage.running_turns import RunningTurnsStore

NOW = 1_000_000


async def slots(db) -> dict[str, int]:
    rows = await db.fetchall("SELECT process, slots FROM gateway_running_turns WHERE process <> '' "
                             "AND user_id = 'ann'")
    return {row["process"]: int(row["slots"]) for row in rows}


async def test_leases_stay_within_the_limit_across_processes(database_config):
    db = await open_database(database_config)
    one, two = RunningTurnsStore(db, "one"), RunningTurnsStore(db, "two")
    try:
        assert await one.lease("ann", 1, 3, NOW, NOW + 30_000) is None
        assert await one.lease("ann", 1, 3, NOW, NOW + 30_000) is None
        assert await two.lease("ann", 1, 3, NOW, NOW + 30_000) is None
        assert await two.lease("ann", 1, 3, NOW, NOW + 30_000) == 3   # refused: 3 held
        assert await two.lease("bob", 1, 3, NOW, NOW + 30_000) is None   # another user
        assert await slots(db) == {"one": 2, "two": 1}
        await one.give_back([("ann", 1)], NOW + 60_000)
        assert await slots(db) == {"one": 1, "two": 1}
        assert await two.lease("ann", 1, 3, NOW, NOW + 30_000) is None
        await one.give_back([("ann", 1)], NOW + 60_000)   # none left: its row is deleted
        assert await slots(db) == {"two": 2}
        # A process that stopped renewing: its places stop counting, then are swept.
        assert await one.lease("ann", 1, 3, NOW + 40_000, NOW + 70_000) is None   # two's expired at NOW + 30 s
        assert await one.sweep(NOW + 40_000) == 2   # two's rows (ann and bob)
        assert await slots(db) == {"one": 1}
        await one.forget()
        assert await slots(db) == {}
    finally:
        await db.close()


async def test_concurrent_leases_never_pass_the_limit(database_config):
    first, second = await open_database(database_config), await open_database(database_config)
    stores = [RunningTurnsStore(first, "one"), RunningTurnsStore(second, "two")]
    try:
        results = await asyncio.gather(*(stores[index % 2].lease("ann", 1, 5, NOW, NOW + 30_000)
                                         for index in range(20)))
        assert sum(result is None for result in results) == 5
        assert sum((await slots(first)).values()) == 5
    finally:
        await first.close()
        await second.close()
