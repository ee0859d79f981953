"""The conversations endpoints' repository on both engines: the list's order and pages,
a conversation's turns, renames, and deletes that are claims (once, however many try)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial

from gateway.storage.conversations import ConversationRepository
from gateway.storage.history import ConversationHistory, expired
from gateway.storage.open import open_database
from tests.storage.test_conversations import conversation, turn


def at(cid: str, created: str, user: str = "u1"):
    return replace(conversation(cid, user), created_at=created, last_message_at=created)


async def test_list_turns_rename_and_delete_once(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    history = ConversationHistory(db, repo)
    await repo.save_many([(at("a", "2026-01-01T00:00:01+00:00"), replace(turn("r1", "a"), content='{"q":"1"}')),
                          (at("b", "2026-01-01T00:00:02+00:00"), turn("r2", "b")),
                          (at("c", "2026-01-01T00:00:03+00:00", "u2"), turn("r3", "c"))])
    await repo.save(at("a", "2026-01-01T00:00:01+00:00"), replace(turn("r4", "a"), content='{"q":"2"}'))
    assert [row["id"] for row in await history.list("u1")] == ["b", "a"]
    assert [row["id"] for row in await history.list(None)] == ["c", "b", "a"]
    assert [row["id"] for row in await history.list(None, limit=1, after="c")] == ["b"]
    assert await history.list("u1", after="zz") == []
    assert [(t.response_id, t.content) for t in await history.turns("a")] == [("r1", '{"q":"1"}'), ("r4", '{"q":"2"}')]

    assert await history.rename("a", "Renamed") and (await history.get("a")).topic_summary == "Renamed"
    assert not await history.rename("nope", "x")

    results = await asyncio.gather(*(history.delete("a") for _ in range(4)))
    [deleted] = [result for result in results if result is not None]
    assert deleted.user_id == "u1" and set(deleted.response_ids) == {"r1", "r4"}
    assert await history.get("a") is None and await history.turns("a") == []
    assert await repo.find_turn("r1") is None
    # An expiry claim keeps a conversation used since its cutoff.
    assert await history.delete("b", idle_before="2026-01-01T00:00:00+00:00") is None
    assert sorted(await history.idle("2026-01-01T00:00:02.5+00:00")) == ["b", "c"]   # their turns ended at :02
    await db.close()


async def test_expired_conversations_are_unknown(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    old, new = "2000-01-01T00:00:00+00:00", datetime.now(timezone.utc).isoformat()
    await repo.save_many([(at("old", old), replace(turn("r1", "old"), completed_at=old)),
                          (at("new", new), replace(turn("r2", "new"), completed_at=new))])
    history = ConversationHistory(db, repo, partial(expired, ttl=3600))
    assert await history.get("old") is None and await history.get("new") is not None
    assert [row["id"] for row in await history.list("u1")] == ["new"]
    assert expired(old, 3600) and not expired(new, 3600) and not expired(old, None) and not expired("bad", 1)
    await db.close()


async def test_the_walk_over_turns_survives_deleted_responses(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    history = ConversationHistory(db, repo)
    for rid in ("t1", "t2", "t3"):
        await repo.save(conversation("w"), replace(turn(rid, "w"), content=f'"{rid}"'))
    await repo.delete_turn("t2")   # in the middle: hidden, still linked through
    assert [t.response_id for t in await history.turns("w")] == ["t1", "t3"]
    await repo.delete_turn("t3")   # the latest: it and the deleted one before it leave the chain
    rows = await db.fetchall("SELECT response_id FROM gateway_turns WHERE conversation_id = 'w'")
    assert sorted(row["response_id"] for row in rows) == ["t1"]
    await repo.save(conversation("w"), replace(turn("t4", "w"), content='"t4"'))
    assert [(t.response_id, t.content) for t in await history.turns("w")] == [("t1", '"t1"'), ("t4", '"t4"')]
    deleted = await history.delete("w")
    assert sorted(deleted.response_ids) == ["t1", "t4"]
    assert await db.fetchall("SELECT response_id FROM gateway_turns WHERE conversation_id = 'w'") == []
    await db.close()
