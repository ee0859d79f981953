"""Which quota strategy `open_quota` picks (quota/service.py), once, from the
configuration and the quota database: none without limiters or storage, SQLite's ledger,
PostgreSQL's holds; and whether its charges ride in the turn writer's batches."""

from __future__ import annotations

from gateway.config import parse_config
from gateway.config.database import DatabaseConfig
from gateway.quota.off import QuotaOff
from gateway.quota.postgres_holds import HoldsQuota
from gateway.quota.service import open_quota
from gateway.quota.sqlite_ledger import LedgerQuota
from gateway.storage.open import open_database
from tests.quota.test_service import LIMITERS, REQUEST, open_service, storage_block, who


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
