"""Migrations: a new database gets the current schema, an old SQLite file is brought to
it, replicas starting together on one PostgreSQL do not race, and the gateway's tables
sit in the configured schema next to LCORE's own tables without touching them."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace

import pytest

from gateway.config.database import DatabaseConfig
from gateway.storage.conversations import ConversationRepository
from gateway.storage.open import open_database
from gateway.storage.migrations import LEGACY_BOOKKEEPING, MIGRATIONS
from tests.storage.test_conversations import conversation, turn


def _sqlite_schema(path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        schema = {table: [tuple(column[1:]) for column in db.execute(f"PRAGMA table_info({table})")]
                  for table in tables}
        schema["indexes"] = sorted(row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'"))
        return schema


async def test_an_old_sqlite_file_is_migrated_to_the_baseline(tmp_path):
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:  # what version 1 of the gateway left behind
        db.execute(f"CREATE TABLE {LEGACY_BOOKKEEPING} (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        for statement in MIGRATIONS[0][1]:
            db.execute(statement)
        db.execute(f"INSERT INTO {LEGACY_BOOKKEEPING} VALUES (1, '2026-01-01')")
        db.execute("INSERT INTO conversations (id, user_id, created_at, last_message_at, message_count, "
                   "turns_recorded, last_response_id) VALUES ('c1', 'u1', 't', 't', 1, 1, 'r1')")
        db.execute("INSERT INTO turns (response_id, conversation_id, turn_number, status, started_at, "
                   "completed_at) VALUES ('r1', 'c1', 1, 'completed', 't', 't')")
    migrated = await open_database(DatabaseConfig.model_validate({"sqlite": {"db_path": str(old)}}))
    repo = ConversationRepository(migrated)
    await repo.save(conversation(), turn("r2"))
    assert (await repo.find_turn("r2"))[0].prior_response_id == "r1"
    await migrated.close()
    fresh = await open_database(DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "new.db")}}))
    await fresh.close()
    assert _sqlite_schema(old) == _sqlite_schema(tmp_path / "new.db")


async def test_replicas_starting_together_migrate_once(postgres):
    config = DatabaseConfig.model_validate({"postgres": postgres.new_database(namespace="lightspeed-stack")})
    replicas = await asyncio.gather(*(open_database(config) for _ in range(6)))
    rows = await replicas[0].fetchall("SELECT version FROM gateway_migrations ORDER BY version")
    assert [row["version"] for row in rows] == [version for version, _ in MIGRATIONS]
    await asyncio.gather(*(ConversationRepository(db).save(conversation(f"c{i}"), turn(f"r{i}", f"c{i}"))
                           for i, db in enumerate(replicas)))
    assert (await replicas[5].fetchone("SELECT COUNT(*) AS n FROM gateway_turns"))["n"] == 6
    for db in replicas:
        await db.close()


async def test_tables_live_in_the_quoted_namespace_beside_lcores(postgres):
    keys = postgres.new_database(namespace="lightspeed-stack")
    # LCORE's own tables in the same schema (its database and its conversation cache).
    postgres.admin('CREATE SCHEMA "lightspeed-stack"',
                   'CREATE TABLE "lightspeed-stack".user_conversation (id text PRIMARY KEY)',
                   'CREATE TABLE "lightspeed-stack".conversations (user_id text, conversation_id text)',
                   'INSERT INTO "lightspeed-stack".conversations VALUES (\'u\', \'c\')',
                   f'ALTER SCHEMA "lightspeed-stack" OWNER TO {keys["user"]}',
                   f'ALTER TABLE "lightspeed-stack".user_conversation OWNER TO {keys["user"]}',
                   f'ALTER TABLE "lightspeed-stack".conversations OWNER TO {keys["user"]}', db=keys["db"])
    db = await open_database(DatabaseConfig.model_validate({"postgres": keys}))
    await ConversationRepository(db).save(conversation(), turn("r1"))
    await db.close()
    tables = postgres.admin("SELECT table_name FROM information_schema.tables WHERE table_schema = 'lightspeed-stack' "
                            "ORDER BY table_name", db=keys["db"])
    assert [row[0] for row in tables] == ["conversations", "gateway_background", "gateway_background_events",
                                          "gateway_conversation_items", "gateway_conversations",
                                          "gateway_deleted_conversations",
                                          "gateway_feedback", "gateway_migrations", "gateway_quota_balances",
                                          "gateway_quota_increments", "gateway_quota_reservations",
                                          "gateway_responses", "gateway_settings",
                                          "gateway_token_usage", "gateway_turns", "user_conversation"]
    assert postgres.admin('SELECT * FROM "lightspeed-stack".conversations', db=keys["db"]) == [["u", "c"]]


async def test_an_unreachable_postgres_is_a_clear_error(postgres):
    from gateway.storage.database import DatabaseUnavailable

    keys = {**postgres.new_database(), "password": "wrong-password"}
    with pytest.raises(DatabaseUnavailable, match=r"database.postgres: cannot connect to gw_\w+@127.0.0.1:\d+/gw_\w+: "
                                                  r"InvalidPasswordError: password authentication failed") as caught:
        await open_database(DatabaseConfig.model_validate({"postgres": keys}))
    assert "wrong-password" not in str(caught.value)


async def test_tls_verified_against_ca_cert_path(postgres):
    """ssl_mode and ca_cert_path as LCORE's keys: verify-full against the given CA
    connects over TLS; without it, as with libpq, the root certificate is looked for in
    ~/.postgresql/root.crt, and its absence is a clear error."""
    from gateway.storage.database import DatabaseUnavailable

    keys = {**postgres.new_database(), "ssl_mode": "verify-full", "ca_cert_path": str(postgres.tls.ca_path)}
    db = await open_database(DatabaseConfig.model_validate({"postgres": keys}))
    row = await db.fetchone("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
    assert row == {"ssl": True}
    await db.close()
    plain = await open_database(DatabaseConfig.model_validate({"postgres": {**keys, "ssl_mode": "disable"}}))
    assert await plain.fetchone("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == {"ssl": False}
    await plain.close()
    with pytest.raises(DatabaseUnavailable, match="root certificate file .*root.crt"):
        await open_database(DatabaseConfig.model_validate({"postgres": {**keys, "ca_cert_path": None}}))


async def test_a_user_who_may_not_create_the_schema_is_a_clear_error(postgres):
    from gateway.storage.database import DatabaseUnavailable

    keys = postgres.new_database()
    postgres.admin(f"REVOKE CREATE ON DATABASE {keys['db']} FROM {keys['user']}", db=keys["db"])
    with pytest.raises(DatabaseUnavailable, match=r'migrating schema "gateway" of .* failed: '
                                                  r"InsufficientPrivilegeError: permission denied"):
        await open_database(DatabaseConfig.model_validate({"postgres": keys}))


async def test_the_form_column_is_filled_from_the_stored_content(database_config):
    """Migration 11: a turn's `conversation_form` column, for rows recorded before it from
    their content's `f` key (the last one orjson wrote): 1 object, 2 bare, 0 the default
    string; NULL for a row without content (before the turn store). A new turn's row
    carries it, and a turn continuing from one reads it from the row (`find_turn`)."""
    from gateway.turns.content import turn_content

    db = await open_database(database_config)
    # The database as version 10 left it: no column, migration 11 not applied.
    await db.execute("ALTER TABLE gateway_turns DROP COLUMN conversation_form")
    await db.execute("DELETE FROM gateway_migrations WHERE version = 11")
    await db.execute("INSERT INTO gateway_conversations (id, user_id, created_at, last_message_at) "
                     "VALUES ('c1', 'u1', 't', 't')")
    contents = {"r-object": turn_content("ends in 1}", {"output": []}, "object"),
                "r-bare": turn_content("q", {"output": [{"type": "mcp_call", "x": "f\":2}"}]}, "bare"),
                "r-string": turn_content('tricky ,"f":1}', {"output": []}),
                "r-old": None}
    for number, (rid, content) in enumerate(contents.items(), 1):
        await db.execute("INSERT INTO gateway_turns (response_id, conversation_id, turn_number, status, started_at, "
                         "completed_at, content) VALUES (:rid, 'c1', :n, 'completed', 't', 't', :content)",
                         {"rid": rid, "n": number, "content": content})
    await db.close()
    migrated = await open_database(database_config)
    repo = ConversationRepository(migrated)
    forms = {rid: (await repo.find_turn(rid))[0].conversation_form for rid in contents}
    assert forms == {"r-object": 1, "r-bare": 2, "r-string": 0, "r-old": None}
    await repo.save(conversation("c2"), replace(turn("r-new", "c2"), conversation_form=2))
    assert (await ConversationRepository(migrated).find_turn("r-new"))[0].conversation_form == 2
    await migrated.close()
