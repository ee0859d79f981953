"""The database API's additions for quotas, on both engines: `now()` (the database's
clock) and `write()` of a run of statements with one text (one `executemany` on
PostgreSQL), in one transaction."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gateway.storage.open import open_database


async def test_now_is_the_databases_clock_in_utc(database_config):
    db = await open_database(database_config)
    try:
        now = await db.now()
        assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
        assert abs(now - datetime.now(timezone.utc)) < timedelta(seconds=30)
    finally:
        await db.close()


async def test_a_run_of_one_statement_text_is_written_in_one_transaction(database_config):
    db = await open_database(database_config)
    insert = ("INSERT INTO gateway_token_usage (user_id, provider, model, day, input_tokens, output_tokens) "
              "VALUES (:u, 'p', 'm', '2026-01-01', :i, 0)")
    try:
        await db.write([(insert, {"u": f"user{n}", "i": n}) for n in range(5)]
                       + [("UPDATE gateway_token_usage SET output_tokens = input_tokens * 2", {})])
        rows = await db.fetchall("SELECT user_id, input_tokens, output_tokens FROM gateway_token_usage "
                                 "ORDER BY user_id")
        assert [(row["user_id"], row["input_tokens"], row["output_tokens"]) for row in rows] == \
            [(f"user{n}", n, 2 * n) for n in range(5)]
        # One failing statement in the run: nothing of the batch is kept.
        with pytest.raises(Exception):
            await db.write([(insert, {"u": "user9", "i": 9}), (insert, {"u": "user0", "i": 0})])
        assert len(await db.fetchall("SELECT user_id FROM gateway_token_usage")) == 5
    finally:
        await db.close()


async def test_an_independent_statement_shares_the_previous_ones_round_trip(database_config, monkeypatch):
    """`SHARES_TRIP`: on PostgreSQL the statement before it runs as a CTE of it (one
    round trip, as a batch's quota charge rides with the last record statement); on
    both engines both take effect, in the transaction."""
    from gateway.storage.database import SHARES_TRIP

    db = await open_database(database_config)
    usage = ("INSERT INTO gateway_token_usage (user_id, provider, model, day, input_tokens, output_tokens) "
             "VALUES (?, 'p', 'm', '2026-01-01', ?, 0)")
    raised = (SHARES_TRIP + "WITH raised AS (SELECT CAST(:by AS BIGINT) AS n) UPDATE gateway_token_usage "
              "SET output_tokens = output_tokens + (SELECT n FROM raised) WHERE user_id = :u "
              "RETURNING user_id, output_tokens")
    trips = 0
    if db.shared:
        import asyncpg

        fetch = asyncpg.connection.Connection.fetch

        async def counted(self, *args, **kwargs):
            nonlocal trips
            trips += 1
            return await fetch(self, *args, **kwargs)

        monkeypatch.setattr(asyncpg.connection.Connection, "fetch", counted)
    try:
        await db.write([(usage, ["ann", 1])])
        returned = await db.write([(usage, ["bo", 2]), (raised, {"by": 5, "u": "ann"})])
        # (PostgreSQL's write returns RETURNING rows; SQLite's nothing: the ledger needs none.)
        assert [(row["user_id"], row["output_tokens"]) for row in returned] == ([("ann", 5)] if db.shared else [])
        rows = await db.fetchall("SELECT user_id, input_tokens, output_tokens FROM gateway_token_usage "
                                 "ORDER BY user_id")
        assert [(row["user_id"], row["input_tokens"], row["output_tokens"]) for row in rows] == \
            [("ann", 1, 5), ("bo", 2, 0)]
        if db.shared:
            assert trips == 1 + 1 + 1   # the first write, the shared trip, the read
        # A failure of either undoes both.
        with pytest.raises(Exception):
            await db.write([(usage, ["cy", 3]), (raised.replace("gateway_token_usage SET", "no_such_table SET"),
                                                 {"by": 1, "u": "ann"})])
        assert len(await db.fetchall("SELECT user_id FROM gateway_token_usage")) == 2
    finally:
        await db.close()
