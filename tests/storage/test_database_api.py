"""The database API's additions for quotas, on both engines: `now()` (the database's
clock) and `write()` of a run of statements with one text (one `executemany` on
PostgreSQL), in one transaction."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gateway.storage.database import open_database


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
