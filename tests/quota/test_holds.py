"""A replica's holds (quota/holds.py): what admits from the spare, what a turn's end
and the scheduler's period do to a hold; the same against a real PostgreSQL, alone and
with two replicas on one balance."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import iso, parse_iso
from gateway.quota.holds import Holds
from gateway.schema.errors import ApiError
from tests.quota.test_batches import rows
from tests.quota.test_service import LIMITERS, REQUEST, held, open_service, who

DAILY = QuotaLimiterConfig.model_validate(LIMITERS[0])
CLUSTER = QuotaLimiterConfig.model_validate(LIMITERS[2])
PAIRS = ((CLUSTER, ""), (DAILY, "ann"))


def test_the_spare_admits_until_it_runs_out_or_a_top_up_is_due():
    holds = Holds("p-")
    assert holds.admit(PAIRS, 100, now=0.0) is None            # no hold yet: ask the database
    cluster, daily = holds.for_pairs(PAIRS)
    assert holds.for_pairs(PAIRS) == (cluster, daily) and cluster.id != daily.id
    for hold in (cluster, daily):
        hold.held, hold.used, hold.until = 500, 100, 50.0     # granted: 100 for a turn, 400 spare
    taken = holds.admit(PAIRS, 300, now=10.0)
    assert taken == (cluster, daily) and cluster.used == daily.used == 400
    assert holds.admit(PAIRS, 101, now=10.0) is None          # 100 spare left on each
    assert holds.admit(PAIRS, 100, now=50.0) is None          # a top-up is due: the database applies it
    daily.held = 400                                          # one balance short is enough to ask
    assert holds.admit(PAIRS, 100, now=10.0) is None


def test_a_turns_end_and_the_period():
    holds = Holds("p-")
    cluster, daily = holds.for_pairs(PAIRS)
    for hold in (cluster, daily):
        hold.held, hold.used, hold.until = 1000, 300, 50.0
    # A committed charge took the turn's 100 off the rows: the spare stays what it was.
    Holds.ended((cluster, daily), 100, released=True)
    assert (cluster.held, cluster.used) == (900, 200)
    # A charge that failed leaves them held: spare, until the period gives it back.
    Holds.ended((cluster,), 100, released=False)
    assert (cluster.held, cluster.used) == (900, 100)
    daily.used = 0
    daily.asking = 0
    changes = holds.tick()
    # The cluster's spare goes back (its row keeps what the turn in progress holds);
    # the daily hold has nothing in use: its row is deleted and it is forgotten.
    assert changes == [(cluster.id, "cluster", "", 800, False), (daily.id, "daily", "ann", 900, True)]
    assert (cluster.held, cluster.used) == (100, 100) and not daily.active and len(holds) == 1
    assert holds.missing({cluster.id}, changes) == [] and holds.missing(set(), changes) == [cluster]
    assert holds.forget_all() == [(cluster.id, "cluster", "", 100, True)] and len(holds) == 0


def test_a_hold_asked_for_is_not_dropped_by_the_period():
    holds = Holds("p-")
    (cluster,) = holds.for_pairs(PAIRS[:1])
    cluster.asking = 1
    assert holds.tick() == [(cluster.id, "cluster", "", 0, False)] and len(holds) == 1


async def test_a_roomy_balance_admits_from_the_spare_and_gives_it_back(database_config):
    if database_config.postgres is None:
        pytest.skip("SQLite's ledger admits in memory without holds (ledger.py)")
    quota, db = await open_service(database_config, [LIMITERS[0] | {"initial_quota": 10 ** 6}])
    try:
        first = await quota.reserve(who("ann"), REQUEST)         # creates the row; alone: no spare
        statements = quota._admissions.statements
        second = await quota.reserve(who("ann"), REQUEST)        # a statement: 100, and a spare of 400
        assert quota._admissions.statements == statements + 1
        assert await rows(db) == await held(db) == {"daily": 600}
        more = [await quota.reserve(who("ann"), REQUEST) for _ in range(4)]
        assert quota._admissions.statements == statements + 1  # from the spare, in memory
        await quota.reserve(who("ann"), REQUEST)                # the spare ran out: a statement again
        assert quota._admissions.statements == statements + 2
        for reservation in [first, second, *more]:
            await quota.write(quota.charge(reservation, 30, 7, "m", "p"))
        assert await quota.available("ann") == {"daily": 10 ** 6 - 6 * 37}
        (hold,) = quota._holds.for_pairs(quota.pairs("ann"))
        assert await rows(db) == await held(db) == {"daily": hold.held} and hold.used == 100
        # The period gives the spare back: only the turn in progress stays held.
        await quota.give_back_holds()
        assert await rows(db) == await held(db) == {"daily": 100}
        # A top-up due is not admitted from memory: the database applies it first.
        await quota.reserve(who("ann"), REQUEST)
        # A day passes (the stored times move back): one top-up is due.
        stored = await db.fetchone("SELECT anchor, next_refill FROM gateway_quota_balances WHERE subject = 'ann'")
        back = timedelta(days=1, seconds=1)
        await db.execute("UPDATE gateway_quota_balances SET anchor = :a, next_refill = :n WHERE subject = 'ann'",
                         {"a": iso(parse_iso(stored["anchor"]) - back), "n": iso(parse_iso(stored["next_refill"]) - back)})
        hold.until = 0.0  # as the next top-up's time passing would make it
        statements = quota._admissions.statements
        await quota.reserve(who("ann"), REQUEST)
        assert quota._admissions.statements > statements
        stored = await db.fetchone("SELECT periods FROM gateway_quota_balances WHERE subject = 'ann'")
        assert int(stored["periods"]) == 1
    finally:
        await quota.close()
        await db.close()
    # Shutting down deleted the replica's holds: nothing stays reserved.
    quota, db = await open_service(database_config, [LIMITERS[0] | {"initial_quota": 10 ** 6}])
    try:
        assert await held(db) == {} and await rows(db) == {"daily": 0}
    finally:
        await quota.close()
        await db.close()


async def test_two_replicas_with_spares_never_overspend(database_config):
    """Two services (replicas, each its own holds) on one roomy balance, turns coming
    and going on both: every admitted turn was covered by tokens reserved in the
    database, the balance ends as running them one by one would leave it, and once
    both gave their spare back nothing is held."""
    if database_config.postgres is None:
        pytest.skip("one process owns a SQLite file")
    limiters = [LIMITERS[2] | {"initial_quota": 20000}]
    first, db = await open_service(database_config, limiters)
    second, other_db = await open_service(database_config, limiters)
    admitted = 0
    in_progress = 0
    most = 0

    async def turns(quota, user: str) -> None:
        nonlocal admitted, in_progress, most
        for _ in range(30):
            try:
                reservation = await quota.reserve(who(user), REQUEST)
            except ApiError as refused:
                assert refused.status == 429
                await asyncio.sleep(0.005)
                continue
            admitted += 1
            in_progress += 1
            most = max(most, in_progress)
            await asyncio.sleep(0.002)
            in_progress -= 1
            await quota.write(quota.charge(reservation, 60, 40, "m", "p"))   # all of its 100

    try:
        await asyncio.gather(*(turns(quota, f"u{index}") for index in range(12) for quota in (first, second)))
        assert admitted > 0
        # Each turn spent what it reserved: never more than the balance had.
        assert admitted * 100 <= 20000
        assert await first.available("x") == {"cluster": 20000 - admitted * 100}
        await first.give_back_holds()
        await second.give_back_holds()
        assert await held(db) == {} and await rows(db) == {"cluster": 0}
    finally:
        await first.close()
        await second.close()
        await db.close()
        await other_db.close()
