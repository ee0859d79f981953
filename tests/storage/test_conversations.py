"""The repository on both engines (a real SQLite file, a real PostgreSQL): create, turns,
ownership lookups, deletes, atomic appends under concurrency, migrations idempotent
across restarts."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from gateway.storage.conversations import ConversationRecord, ConversationRepository, TurnRecord
from gateway.storage.open import open_database
from gateway.storage.migrations import MIGRATIONS


def conversation(cid: str = "c1", user: str = "u1") -> ConversationRecord:
    return ConversationRecord(id=cid, user_id=user, upstream_id=f"conv_{cid}", created_at="2026-01-01T00:00:00",
                              last_message_at="2026-01-01T00:00:00", last_used_model="m", last_used_provider="p",
                              last_response_id=None, message_count=0, topic_summary="", generate_topic_summary=True)


def turn(rid: str, cid: str = "c1") -> TurnRecord:
    return TurnRecord(conversation_id=cid, response_id=rid, previous_response_id=None, model="m", provider="p",
                      status="completed", started_at="2026-01-01T00:00:01", completed_at="2026-01-01T00:00:02")


async def test_save_find_and_delete(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    await repo.save(conversation(), None)
    stored = await repo.get("c1")
    assert stored.user_id == "u1" and stored.message_count == 0 and stored.generate_topic_summary
    await repo.save(conversation(), turn("r1"))
    await repo.save(conversation(user="someone else"), turn("r2"))  # owner never changes
    stored = await repo.get("c1")
    assert (stored.user_id, stored.message_count, stored.last_response_id) == ("u1", 2, "r2")
    found_turn, owner = await repo.find_turn("r1")
    assert found_turn.turn_number == 1 and owner.id == "c1"
    await repo.delete_turn("r2")
    stored = await repo.get("c1")
    assert (stored.message_count, stored.last_response_id) == (1, "r1")
    assert await repo.find_turn("r2") is None and await repo.get("nope") is None
    await db.close()


async def test_concurrent_turns_get_distinct_numbers(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    await asyncio.gather(*(repo.save(conversation(), turn(f"r{i}")) for i in range(50)))
    rows = await db.fetchall("SELECT turn_number FROM gateway_turns ORDER BY turn_number")
    assert [row["turn_number"] for row in rows] == list(range(1, 51))
    assert (await repo.get("c1")).message_count == 50
    await db.close()


async def test_migrations_apply_once(database_config):
    db = await open_database(database_config)
    await ConversationRepository(db).save(conversation(), turn("r1"))
    await db.close()
    db = await open_database(database_config)
    assert [row["version"] for row in await db.fetchall("SELECT version FROM gateway_migrations ORDER BY version")] \
        == [version for version, _ in MIGRATIONS]
    assert (await ConversationRepository(db).get("c1")).message_count == 1
    await db.close()


async def test_failed_transaction_rolls_back(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    await repo.save(conversation(), turn("r1"))
    try:
        await repo.save(conversation(), turn("r1"))  # duplicate response id
    except Exception:
        pass
    assert (await repo.get("c1")).message_count == 1
    await db.close()


async def test_deleting_turns_walks_back_over_deleted_ones(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    for rid in ("r1", "r2", "r3", "r4"):
        await repo.save(conversation(), turn(rid))
    await repo.delete_turn("r2")  # a middle turn: the conversation still ends at r4
    assert (await repo.get("c1")).last_response_id == "r4"
    await repo.delete_turn("r4")
    assert (await repo.get("c1")).last_response_id == "r3"
    await repo.delete_turn("r3")  # r2 is deleted too: back to r1
    stored = await repo.get("c1")
    assert (stored.last_response_id, stored.message_count) == ("r1", 1)
    await repo.delete_turn("r1")
    assert (await repo.get("c1")).last_response_id is None
    await repo.save(conversation(), turn("r5"))  # numbering never reuses a deleted turn's number
    assert (await repo.find_turn("r5"))[0].turn_number == 5
    await db.close()


async def test_turns_link_to_the_turn_before(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    await repo.save(conversation(), turn("r1"))
    await repo.save(conversation(), turn("r2"))
    assert (await repo.find_turn("r1"))[0].prior_response_id is None
    assert (await repo.find_turn("r2"))[0].prior_response_id == "r1"
    await db.close()


async def test_cached_records_are_what_the_database_holds(database_config):
    db = await open_database(database_config)
    cached = ConversationRepository(db)

    async def agree() -> None:
        fresh = ConversationRepository(db)  # nothing cached: straight from the database
        for cid in ("c1", "c2"):
            assert await cached.get(cid) == await fresh.get(cid)
        for rid in ("r1", "r2", "r3", "r4", "x1"):
            assert await cached.find_turn(rid) == await fresh.find_turn(rid)

    await cached.save_many([(conversation("c1"), turn("r1")), (conversation("c2"), turn("x1", "c2"))])
    await agree()  # read once: now cached
    # Several turns of one conversation in one batch, and one in a later batch.
    await cached.save_many([(conversation("c1"), turn("r2")), (conversation("c1"), turn("r3"))])
    await cached.save(conversation("c1"), turn("r4"))
    await agree()
    assert (await cached.get("c1")).last_response_id == "r4" and (await cached.find_turn("r4"))[0].turn_number == 4
    await cached.delete_turn("r4")
    await cached.delete_turn("r2")
    await agree()
    assert (await cached.get("c1")).last_response_id == "r3"
    await db.close()


async def test_replicas_on_one_database_see_each_others_turns(database_config):
    """Two repositories on one database (two replicas): what one commits, the other reads
    at once, even after it has read the conversation before (on PostgreSQL nothing that
    changes is cached; SQLite has one writer process, whose cache is the database)."""
    if database_config.postgres is None:
        pytest.skip("one SQLite file has one writing process")
    first_db, second_db = await open_database(database_config), await open_database(database_config)
    first, second = ConversationRepository(first_db), ConversationRepository(second_db)
    await first.save(conversation(), turn("r1"))
    assert (await second.get("c1")).last_response_id == "r1"
    await second.save(conversation(), turn("r2"))
    assert (await first.get("c1")).last_response_id == "r2"
    assert (await first.find_turn("r2"))[0].turn_number == 2
    await asyncio.gather(*(repo.save(conversation(), turn(f"x{i}-{n}"))
                           for i in range(20) for n, repo in enumerate((first, second))))
    rows = await first_db.fetchall("SELECT turn_number FROM gateway_turns ORDER BY turn_number")
    assert [row["turn_number"] for row in rows] == list(range(1, 43))
    await second.delete_turn("r1")
    assert await first.find_turn("r1") is None
    await first_db.close()
    await second_db.close()


async def test_a_new_conversation_keeps_its_topic_summary(database_config):
    """Written when the conversation is created (with its first turn, or without one:
    a failed first turn), never by a later turn's record."""
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    await repo.save(replace(conversation(), topic_summary="Pod Autoscaling Basics"), turn("r1"))
    await repo.save(replace(conversation("c2"), topic_summary="Failed First Turn"), None)
    await repo.save(conversation(), turn("r2"))   # a later turn's record carries ""
    fresh = ConversationRepository(db)             # read from the database, not the cache
    assert (await fresh.get("c1")).topic_summary == "Pod Autoscaling Basics"
    assert (await fresh.get("c2")).topic_summary == "Failed First Turn"
    await db.close()


async def test_a_turns_content_is_written_with_its_row(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    await repo.save_many([(conversation(), replace(turn("r1"), content='{"q":"hi","a":"hello"}')),
                          (conversation("c2"), turn("r2"))])
    rows = await db.fetchall("SELECT response_id, content FROM gateway_turns ORDER BY response_id")
    assert [(row["response_id"], row["content"]) for row in rows] == [("r1", '{"q":"hi","a":"hello"}'), ("r2", None)]
    await db.close()
