"""QuotaService over both engines (SQLite and a private PostgreSQL): admission cannot
overspend under concurrency, each limiter has its own balance, replenishment is exact
(tests move the stored timestamps), charges and releases, a reopened database keeps
balances, expired reservations stop counting; and which strategy `open_quota` picks, once,
from the configuration and the quota database: none without limiters or storage, SQLite's
ledger, PostgreSQL's holds, and whether its charges ride in the turn writer's batches."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from gateway.config import parse_config
from gateway.config.database import DatabaseConfig
from gateway.identity import Identity
from gateway.quota.balances import iso
from gateway.quota.off import QuotaOff
from gateway.quota.postgres_holds import HoldsQuota
from gateway.quota.service import open_quota
from gateway.quota.sqlite_ledger import LedgerQuota
from gateway.schema.errors import ApiError
from gateway.storage.open import open_database

LIMITERS = [
    {"name": "daily", "type": "user_limiter", "initial_quota": 1000, "quota_increase": 100, "period": "1 day"},
    {"name": "monthly", "type": "user_limiter", "initial_quota": 5000, "quota_increase": 5000, "period": "1 month",
     "replenish": "reset"},
    {"name": "cluster", "type": "cluster_limiter", "initial_quota": 100000, "quota_increase": 0, "period": "1 day"},
]


def storage_block(database_config: DatabaseConfig) -> dict:
    return database_config.model_dump(mode="json", exclude_none=True) | (
        {"postgres": {**database_config.postgres.model_dump(mode="json", exclude_none=True),
                      "password": database_config.postgres.password.get_secret_value()}}
        if database_config.postgres else {})


async def held(db) -> dict[str, int]:
    """What reservation rows (PostgreSQL: the replicas' holds) hold, per limiter."""
    found = await db.fetchall("SELECT limiter, SUM(tokens) AS tokens FROM gateway_quota_reservations GROUP BY limiter")
    return {row["limiter"]: int(row["tokens"]) for row in found}


async def open_service(database_config, limiters=LIMITERS, **extra):
    storage = storage_block(database_config)
    config = parse_config({"name": "t", "llama_stack": {"url": "http://u"}, "database": storage,
                           "quota_handlers": {**storage, "limiters": limiters, **extra}})
    db = await open_database(config.database)
    return await open_quota(config.quota_handlers, db, config.database), db


def who(user: str) -> Identity:
    return Identity(user_id=user, username=user)


REQUEST = {"input": "hi", "max_output_tokens": 99}   # 1 + 99 = 100 tokens reserved


async def test_concurrent_admission_never_overspends(database_config):
    quota, db = await open_service(database_config, [{**LIMITERS[0], "initial_quota": 1000}])
    try:
        results = await asyncio.gather(*(quota.reserve(who("ann"), REQUEST) for _ in range(50)),
                                       return_exceptions=True)
        admitted = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, ApiError)]
        assert len(admitted) == 10 and len(refused) == 40
        assert {r.cause for r in refused} == {"User ann has no available tokens"}
        assert refused[0].status == 429 and refused[0].headers["x-should-retry"] == "false"
        # Each admitted turn used 37 tokens: the balance is what running them one by one leaves.
        for reservation in admitted:
            await quota.write(quota.charge(reservation, 30, 7, "m", "p"))
        assert await quota.available("ann") == {"daily": 1000 - 10 * 37}
        assert not any((await held(db)).values())
    finally:
        await quota.close()
        await db.close()


async def reopen(quota, db, database_config, limiters=LIMITERS):
    """A restart: after the test edits stored rows (on SQLite the process keeps the
    balances it uses in memory, as the only writer of the file)."""
    await quota.close()
    await db.close()
    return await open_service(database_config, limiters)


async def test_limiters_have_their_own_balances_and_replenish_exactly(database_config):
    quota, db = await open_service(database_config)
    try:
        reservation = await quota.reserve(who("bo"), REQUEST)
        await quota.write(quota.charge(reservation, 200, 50, "m", "p"))
        assert await quota.available("bo") == {"daily": 750, "monthly": 4750, "cluster": 99750}
        assert await quota.available("cy") == {"daily": 1000, "monthly": 5000, "cluster": 99750}
        # Move bo's stored times back 3 days and 2 hours: three daily top-ups are due,
        # the monthly one not yet; applied once each, whoever asks and how often.
        await shift_times(db, "daily", "bo", timedelta(days=3, hours=2))
        quota, db = await reopen(quota, db, database_config)
        assert (await quota.available("bo"))["daily"] == 1050
        for _ in range(3):
            reservation = await quota.reserve(who("bo"), REQUEST)
            await quota.release(reservation)
        assert (await quota.available("bo"))["daily"] == 1050
        row = await db.fetchone("SELECT periods, available FROM gateway_quota_balances "
                                "WHERE limiter = 'daily' AND subject = 'bo'")
        assert (row["periods"], row["available"]) == (3, 1050)
        # A month later the monthly limiter resets to its initial quota (once).
        await shift_times(db, "monthly", "bo", timedelta(days=32))
        quota, db = await reopen(quota, db, database_config)
        await quota.release(await quota.reserve(who("bo"), REQUEST))
        assert (await quota.available("bo"))["monthly"] == 5000
        # A restart keeps the balances.
        quota, db = await reopen(quota, db, database_config)
        assert await quota.available("bo") == {"daily": 1050, "monthly": 5000, "cluster": 99750}
    finally:
        await quota.close()
        await db.close()


async def test_refusals_name_the_limiter_and_the_shortfall(database_config):
    limiters = [LIMITERS[2] | {"initial_quota": 150}]
    quota, db = await open_service(database_config, limiters)
    try:
        first = await quota.reserve(who("di"), REQUEST)
        with pytest.raises(ApiError) as refused:
            await quota.reserve(who("ed"), REQUEST)
        assert refused.value.cause == "Cluster has 50 tokens, but 100 tokens are needed"
        assert 0 < int(refused.value.headers["Retry-After"]) <= 86400
        # An abandoned turn is charged its reservation.
        await quota.release(first, first.tokens)
        assert await quota.available("x") == {"cluster": 50}
        with pytest.raises(ApiError) as refused:
            await quota.reserve(who("ed"), REQUEST)
        assert refused.value.cause == "Cluster has 50 tokens, but 100 tokens are needed"
        assert await quota.change([(quota.pairs("x")[0], 1000)], add=False)
        held = await quota.reserve(who("di"), REQUEST)
        if db.shared:
            # A reservation whose turn never settles (its replica died) stops counting
            # once it expires, and the sweep deletes it.
            await db.execute("UPDATE gateway_quota_reservations SET expires_at = :t", {"t": iso(quota.now())})
            assert await quota.store.sweep(quota.now()) == 1
            assert (await quota.held(quota.pairs("di")))[0].reserved == 0
        else:
            assert (await quota.held(quota.pairs("di")))[0].reserved == 100
        await quota.release(held)  # nothing charged
        assert await quota.available("x") == {"cluster": 1000}
        assert (await quota.held(quota.pairs("di")))[0].reserved == 0
    finally:
        await quota.close()
        await db.close()


async def shift_times(db, limiter: str, subject: str, by: timedelta) -> None:
    """Move a balance's stored period times into the past (what waiting would do)."""
    row = await db.fetchone("SELECT anchor, next_refill FROM gateway_quota_balances "
                            "WHERE limiter = :l AND subject = :s", {"l": limiter, "s": subject})
    await db.execute("UPDATE gateway_quota_balances SET anchor = :a, next_refill = :n WHERE limiter = :l "
                     "AND subject = :s", {"a": iso(datetime.fromisoformat(row["anchor"]) - by),
                                          "n": iso(datetime.fromisoformat(row["next_refill"]) - by),
                                          "l": limiter, "s": subject})


async def test_the_sqlite_ledger_keeps_a_bounded_number_of_balances(tmp_path, monkeypatch):
    from gateway.quota import ledger

    monkeypatch.setattr(ledger, "_CACHED", 3)
    config = DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "g.db")}})
    quota, db = await open_service(config, [LIMITERS[0]])
    try:
        held = await quota.reserve(who("u0"), REQUEST)
        for n in range(1, 6):
            await quota.release(await quota.reserve(who(f"u{n}"), REQUEST), 10)
        kept = quota._ledger._balances
        assert len(kept) <= 4 and ("daily", "u0") in kept   # a balance with a reservation stays
        # One dropped is read back from the database as it was left.
        assert await quota.available("u1") == {"daily": 990}
        await quota.release(held)
    finally:
        await quota.close()
        await db.close()


# Which strategy `open_quota` picks, and whether its charges ride in the writer's batches.


async def test_quotas_are_off_without_limiters_or_storage(tmp_path):
    turns = DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "g.db")}})
    db = await open_database(turns)
    try:
        # Limiters without storage (LCORE only warns), storage without limiters, no block.
        for block in ({"limiters": LIMITERS}, {**storage_block(turns), "limiters": []}, None):
            config = parse_config({"name": "t", "llama_stack": {"url": "http://u"}, "database": storage_block(turns)}
                                  | ({"quota_handlers": block} if block is not None else {}))
            quota = await open_quota(config.quota_handlers, db, config.database)
            assert isinstance(quota, QuotaOff)
            assert not quota.enabled and quota.batch is None and quota.limiters == []
            assert await quota.reserve(who("ann"), REQUEST) is None
            assert await quota.available("ann") == {}
            assert await quota.usage("2000-01-01", "2999-12-31", None) == []
            quota.forget(None)   # a turn without a reservation whose record failed: nothing to do
    finally:
        await db.close()


async def test_the_strategy_follows_the_quota_database(database_config):
    quota, db = await open_service(database_config, [LIMITERS[0]])
    try:
        assert isinstance(quota, HoldsQuota if database_config.postgres else LedgerQuota)
        # The turn database: charges commit with the records, the writer's batch participant.
        assert quota.enabled and quota.shares_turn_database and quota.batch is quota
        reservation = await quota.reserve(who("ann"), REQUEST)
        charge = quota.charge(reservation, 30, 7, "m", "p")
        assert (charge.reservation, charge.tokens, charge.usage) == (reservation, 37, None)   # no history kept
        await quota.write(charge)
        assert await quota.available("ann") == {"daily": 1000 - 37}
    finally:
        await quota.close()
        await db.close()


async def test_quotas_in_a_database_of_their_own_are_not_a_batch_participant(tmp_path):
    turns = {"sqlite": {"db_path": str(tmp_path / "turns.db")}}
    config = parse_config({"name": "t", "llama_stack": {"url": "http://u"}, "database": turns,
                           "quota_handlers": {"sqlite": {"db_path": str(tmp_path / "quotas.db")},
                                              "limiters": [LIMITERS[0]], "enable_token_history": True}})
    db = await open_database(config.database)
    quota = await open_quota(config.quota_handlers, db, config.database)
    try:
        assert isinstance(quota, LedgerQuota) and not quota.shares_turn_database and quota.batch is None
        reservation = await quota.reserve(who("bo"), REQUEST)
        charge = quota.charge(reservation, 30, 7, "m", "p")
        assert charge.usage is not None and (charge.usage.input_tokens, charge.usage.output_tokens) == (30, 7)
        await quota.write(charge)
        assert [(row["input_tokens"], row["output_tokens"])
                for row in await quota.usage("2000-01-01", "2999-12-31", "bo")] == [(30, 7)]
        # Nothing of it in the turn database.
        assert await db.fetchone("SELECT COUNT(*) AS n FROM gateway_quota_balances") == {"n": 0}
    finally:
        await quota.close()
        await db.close()


async def test_extend_reserves_more_all_or_none_and_the_charge_ends_it_all(database_config):
    """A turn's context, then each engine round after the first (`QuotaService.extend`):
    more tokens on the same reservation, refused with 429 when a balance cannot cover
    them (nothing taken then); the charge releases everything reserved."""
    from gateway.schema.errors import ApiError

    quota, db = await open_service(database_config, [LIMITERS[0]])
    try:
        reservation = await quota.reserve(who("ann"), REQUEST)
        first = reservation.tokens
        await quota.extend(reservation, 300)
        assert reservation.tokens == first + 300
        held = await quota.held(quota.pairs("ann"))
        assert held[0].reserved >= first + 300
        try:
            await quota.extend(reservation, 10 ** 6)
            raise AssertionError("not refused")
        except ApiError as exc:
            assert exc.status == 429 and "tokens are needed" in exc.cause
        assert reservation.tokens == first + 300
        await quota.write(quota.charge(reservation, 200, 50, "m", "p"))
        assert await quota.available("ann") == {"daily": 1000 - 250}
        if database_config.postgres:
            await quota.give_back_holds()
        assert sum(held.reserved for held in await quota.held(quota.pairs("ann"))) == 0
    finally:
        await quota.close()
        await db.close()
