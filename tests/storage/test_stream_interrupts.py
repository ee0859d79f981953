"""Interrupt questions in a table (storage/stream_interrupts.py): asked, seen unanswered
by the others, answered once, deleted by the asker with any left behind long ago."""

from __future__ import annotations

from gateway.storage.open import open_database
from gateway.storage.stream_interrupts import KEPT_MS, StreamInterruptsStore

NOW = 5_000_000


async def test_a_question_is_answered_once_and_forgotten(database_config):
    db = await open_database(database_config)
    store = StreamInterruptsStore(db)
    try:
        await store.ask("a1", "req-1", "ann", NOW)
        await store.ask("old", "req-0", "ann", NOW - KEPT_MS - 1)
        assert await store.unanswered(NOW - 1000) == [("a1", "req-1", "ann")]   # not the old one
        assert await store.outcome("a1") is None
        await store.answer("a1", "interrupted")
        await store.answer("a1", "finished")   # the first answer stays
        assert await store.outcome("a1") == "interrupted" and await store.unanswered(NOW - 1000) == []
        await store.forget("a1", NOW)
        assert await db.fetchall("SELECT ask FROM gateway_stream_interrupts") == []
    finally:
        await db.close()
