"""Quota work done once per batch of turns: group admission on PostgreSQL
(`quota/admission.py`), one charge statement per balance row, one balance read per
writer batch; each turn still reserved on all its limiters or on none."""

from __future__ import annotations

import asyncio

import pytest

from gateway.quota.balances import iso
from gateway.schema.errors import ApiError
from gateway.storage.batch import in_lock_order
from tests.quota.test_service import LIMITERS, REQUEST, held, open_service, who


async def rows(db) -> dict[str, int]:
    """What reservations hold, per limiter (over its subjects)."""
    found = await db.fetchall("SELECT limiter, SUM(reserved) AS reserved FROM gateway_quota_balances GROUP BY limiter")
    return {row["limiter"]: int(row["reserved"]) for row in found}


async def test_concurrent_admissions_are_one_statement_each_all_or_none(database_config):
    if database_config.postgres is None:
        pytest.skip("admission is in memory on SQLite (ledger.py)")
    limiters = [LIMITERS[0] | {"initial_quota": 1000}, LIMITERS[2] | {"initial_quota": 1500}]
    quota, db = await open_service(database_config, limiters)
    try:
        await quota.release(await quota.reserve(who("ann"), REQUEST))   # creates ann's and the cluster's rows
        admissions = quota._admissions
        before = admissions.statements
        batch = await asyncio.gather(*(quota.reserve(who("ann"), REQUEST) for _ in range(8)))
        assert admissions.statements == before + 1          # eight turns, one statement
        assert await rows(db) == {"cluster": 800, "daily": 800}
        # Held on this replica's hold on each balance: one row each, not one per turn.
        assert await held(db) == {"cluster": 800, "daily": 800}
        assert (await db.fetchone("SELECT COUNT(*) AS n FROM gateway_quota_reservations"))["n"] == 2
        # Five more do not fit together (200 left for ann): nothing of that batch is
        # reserved, then each tries alone; two get in, on both limiters, three are refused.
        results = await asyncio.gather(*(quota.reserve(who("ann"), REQUEST) for _ in range(5)),
                                       return_exceptions=True)
        admitted = [r for r in results if not isinstance(r, BaseException)]
        assert len(admitted) == 2 and all(isinstance(r, ApiError) and r.status == 429
                                          for r in results if r not in admitted)
        assert await rows(db) == {"cluster": 1000, "daily": 1000}
        for reservation in batch + admitted:
            await quota.write(quota.charge(reservation, 30, 7, "m", "p"))
        assert await rows(db) == {"cluster": 0, "daily": 0}
        assert await quota.available("ann") == {"daily": 1000 - 10 * 37, "cluster": 1500 - 10 * 37}
        assert await held(db) == {"cluster": 0, "daily": 0}
        # A batch of users some of whom have no row yet: the batch fails, each goes alone.
        mixed = await asyncio.gather(*(quota.reserve(who(name), REQUEST) for name in ("ann", "bo", "cy")))
        assert await rows(db) == {"cluster": 300, "daily": 300}
        for reservation in mixed:
            await quota.release(reservation)
    finally:
        await quota.close()
        await db.close()


async def test_balances_read_after_a_writer_batch_serve_its_turns(database_config):
    """`committed` (after a writer batch) reads the balances a batch charged in one
    query; the batch's turns answer `available_quotas` from it without reading again."""
    if database_config.postgres is None:
        pytest.skip("the ledger answers from memory on SQLite")
    quota, db = await open_service(database_config, [LIMITERS[0], LIMITERS[2]])
    try:
        turns = [await quota.reserve(who(name), REQUEST) for name in ("ann", "bo")]
        charges = [quota.charge(turn, 30, 7, "m", "p") for turn in turns]
        await quota.write(*charges)
        await quota.committed(charges, [])
        reads = 0
        fetchall = db.fetchall

        async def counted(sql, *args, **kwargs):
            nonlocal reads
            reads += sql.startswith("SELECT")   # a balance read (not an admission: WITH …)
            return await fetchall(sql, *args, **kwargs)

        db.fetchall = counted
        assert await quota.available_after_batch("ann") == {"daily": 963, "cluster": 100000 - 2 * 37}
        assert await quota.available_after_batch("bo") == {"daily": 963, "cluster": 100000 - 2 * 37}
        assert reads == 0
        assert await quota.available_after_batch("cy") == {"daily": 1000, "cluster": 100000 - 2 * 37}
        assert reads == 1
        # A writer batch's combined charge returns the balances after it: no read at all.
        turns = [await quota.reserve(who(name), REQUEST) for name in ("ann", "cy")]
        charges = [quota.charge(turn, 30, 7, "m", "p") for turn in turns]
        returned = await db.write(in_lock_order(quota.statements(charges)))
        await quota.committed(charges, returned)
        assert await quota.available_after_batch("ann") == {"daily": 926, "cluster": 100000 - 4 * 37}
        assert await quota.available_after_batch("cy") == {"daily": 963, "cluster": 100000 - 4 * 37}
        assert reads == 1
    finally:
        await quota.close()
        await db.close()


async def test_a_batch_of_charges_is_one_statement_per_row(database_config):
    quota, db = await open_service(database_config, [LIMITERS[0], LIMITERS[2]], enable_token_history=True)
    try:
        turns = [await quota.reserve(who(name), REQUEST) for name in ("ann", "ann", "bo")]
        charges = [quota.charge(turn, 30, 7, "m", "p") for turn in turns]
        each = list(charges)
        combined = quota.statements(each)
        # Each turn hands over one charge, made statements with its batch's: ann's daily and
        # usage rows, bo's, and the cluster's: five rows, five statements (on PostgreSQL
        # the three balance rows' charges then go as one).
        assert len(each) == 3 and len(combined) == (3 if db.shared else 5)
        if db.shared:
            # The hold on bo's daily balance expired and was swept first: what bo's turn
            # held is released once, not twice.
            await db.execute("UPDATE gateway_quota_reservations SET expires_at = :t WHERE id = :id",
                             {"t": iso(quota.now()), "id": turns[2].holds[1].id})
            assert await quota.store.sweep(quota.now()) == 1
        await quota.write(*each)
        assert await quota.available("ann") == {"daily": 1000 - 2 * 37, "cluster": 100000 - 3 * 37}
        assert await quota.available("bo") == {"daily": 963, "cluster": 100000 - 3 * 37}
        # The cluster had room for a spare (holds.py); the daily balances did not.
        assert await rows(db) == {"cluster": 4 * 100 if db.shared else 0, "daily": 0}
        if db.shared:
            await quota.give_back_holds()   # the scheduler's period (holds: PostgreSQL's)
        assert await rows(db) == {"cluster": 0, "daily": 0}
        assert await held(db) == {}
        usage = await quota.store.usage("2000-01-01", "2999-12-31", "ann")
        assert [(row["input_tokens"], row["output_tokens"]) for row in usage] == [(60, 14)]
        # Each turn keeps its own charge (a batch that fails is retried turn by turn).
        assert charges[0].reservation is turns[0]
    finally:
        await quota.close()
        await db.close()


async def test_a_turn_cancelled_while_its_batch_is_admitted_gives_its_tokens_back(database_config):
    if database_config.postgres is None:
        pytest.skip("admission is in memory on SQLite (ledger.py)")
    quota, db = await open_service(database_config, [LIMITERS[0]])
    try:
        await quota.release(await quota.reserve(who("ann"), REQUEST))
        kept = asyncio.ensure_future(quota.reserve(who("ann"), REQUEST))
        left = asyncio.ensure_future(quota.reserve(who("ann"), REQUEST))
        await asyncio.sleep(0)   # both queued, their statement sent
        left.cancel()
        reservation = await kept
        for _ in range(100):
            if await rows(db) == {"daily": 100}:
                break
            await asyncio.sleep(0.01)
        assert await rows(db) == {"daily": 100}
        await quota.release(reservation)
    finally:
        await quota.close()
        await db.close()


async def test_a_batch_retried_turn_by_turn_keeps_each_good_turns_charge(database_config):
    """A writer batch that fails (here a duplicate response id) is retried turn by turn,
    each turn's charge made statements again (`BatchParticipant.statements`):
    the good turn is recorded and charged, the bad one neither."""
    from gateway.storage.conversations import ConversationRepository
    from gateway.storage.writer import TurnWriter
    from tests.storage.test_conversations import conversation, turn

    quota, db = await open_service(database_config, [LIMITERS[0]])
    repository = ConversationRepository(db)
    await repository.save(conversation(), turn("taken"))
    writer = TurnWriter(repository, quota.batch, linger=0.01)
    writer.start()
    try:
        good, bad = [await quota.reserve(who("ann"), REQUEST) for _ in range(2)]
        recorded = writer.submit(conversation(), turn("fresh"), charge=quota.charge(good, 30, 7, "m", "p"))
        failed = writer.submit(conversation(), turn("taken"), charge=quota.charge(bad, 40, 9, "m", "p"))
        await recorded
        with pytest.raises(Exception, match="gateway_turns.response_id"):
            await failed
        quota.forget(bad)   # as the pipeline does when a turn's record failed (`Pipeline._finished`)
        # Only the good turn's 37 tokens are spent, in the database and as the service
        # tells it (SQLite's ledger read its balances again after the failure).
        assert await quota.available("ann") == {"daily": 1000 - 37}
        stored = await db.fetchone("SELECT available FROM gateway_quota_balances WHERE subject = 'ann'")
        assert int(stored["available"]) == 1000 - 37
    finally:
        await writer.close()
        await quota.close()
        await db.close()
