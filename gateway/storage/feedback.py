"""Feedback rows and the feedback switch (issue 22), in the database every replica
shares: a `PUT /v1/feedback/status` on one replica is what every other answers next
(LCORE keeps the flag per process)."""

from __future__ import annotations


import orjson

from gateway.schema.json_types import JsonObject
from gateway.storage.database import Database

_FEEDBACK_ENABLED = "feedback_enabled"


class FeedbackStore:
    def __init__(self, db: Database):
        self._db = db

    async def add(self, feedback_id: str, user_id: str, conversation_id: str, created_at: str,
                  feedback: JsonObject) -> None:
        await self._db.execute(
            "INSERT INTO gateway_feedback (id, user_id, conversation_id, created_at, feedback) "
            "VALUES (:id, :user, :conversation, :at, :feedback)",
            {"id": feedback_id, "user": user_id, "conversation": conversation_id, "at": created_at,
             "feedback": orjson.dumps(feedback).decode()})

    async def enabled(self, configured: bool) -> bool:
        """The switch as last set by an admin, or the configuration's until then."""
        row = await self._db.fetchone("SELECT value FROM gateway_settings WHERE name = :name",
                                      {"name": _FEEDBACK_ENABLED})
        return bool(orjson.loads(row["value"])) if row is not None else configured

    async def set_enabled(self, enabled: bool, configured: bool, by: str, at: str) -> bool:
        """Set the switch; the value it had."""
        async with self._db.transaction() as tx:
            row = await tx.fetchone("SELECT value FROM gateway_settings WHERE name = :name",
                                    {"name": _FEEDBACK_ENABLED})
            previous = bool(orjson.loads(row["value"])) if row is not None else configured
            await tx.execute(
                "INSERT INTO gateway_settings (name, value, updated_by, updated_at) VALUES (:name, :value, :by, :at) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, "
                "updated_at = excluded.updated_at",
                {"name": _FEEDBACK_ENABLED, "value": orjson.dumps(enabled).decode(), "by": by, "at": at})
        return previous
