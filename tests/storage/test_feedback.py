"""Feedback rows and the shared switch on both engines."""

from __future__ import annotations

from gateway.storage.feedback import FeedbackStore
from gateway.storage.open import open_database


async def test_rows_and_the_switch(database_config):
    db = await open_database(database_config)
    store = FeedbackStore(db)
    await store.add("f1", "u", "c", "2026-01-01T00:00:00+00:00", {"sentiment": 1})
    assert [dict(row) for row in await db.fetchall("SELECT id, user_id, conversation_id, feedback FROM gateway_feedback")] \
        == [{"id": "f1", "user_id": "u", "conversation_id": "c", "feedback": '{"sentiment":1}'}]
    assert await store.enabled(True) is True and await store.enabled(False) is False   # the configuration's
    assert await store.set_enabled(False, True, "admin", "t1") is True
    assert await store.enabled(True) is False
    assert await store.set_enabled(True, True, "admin", "t2") is False
    assert await store.enabled(False) is True
    await db.close()
