"""Storing feedback (issue 22): LCORE's JSON file per feedback under
`user_data_collection.feedback_storage` (`<uuid4>.json` = `{user_id, timestamp,
**request}`), written in a worker thread so a slow disk holds no other request, plus a
row in the database so replicas and operators can query it. Feedback outlives the
conversation it is about: deleting a conversation keeps its feedback (rows and files
name the conversation id only)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict

from gateway.config import UserDataCollectionConfig
from gateway.schema.json_types import JsonObject
from gateway.storage.feedback import FeedbackStore


class FeedbackStatusUpdate(TypedDict):
    """LCORE's `FeedbackStatusUpdateResponse` status: the switch before and after, who, when."""
    previous_status: bool
    updated_status: bool
    updated_by: str
    timestamp: str


class FeedbackWriter:
    def __init__(self, config: UserDataCollectionConfig, store: FeedbackStore):
        self._config = config
        self.store = store

    async def enabled(self) -> bool:
        return await self.store.enabled(self._config.feedback_enabled)

    async def set_enabled(self, enabled: bool, by: str) -> FeedbackStatusUpdate:
        """LCORE's update body: previous and new status, who, when."""
        at = datetime.now(timezone.utc).isoformat()
        previous = await self.store.set_enabled(enabled, self._config.feedback_enabled, by, at)
        return {"previous_status": previous, "updated_status": enabled, "updated_by": by, "timestamp": at}

    async def store_feedback(self, user_id: str, conversation_id: str, feedback: JsonObject) -> None:
        """The file, then the row (OSError: the file could not be written; nothing stored)."""
        feedback_id = str(uuid.uuid4())
        now = datetime.now(timezone.utc)
        record = {"user_id": user_id, "timestamp": str(now), **feedback}
        directory = Path(self._config.feedback_storage or ".")
        await asyncio.to_thread(_write, directory / f"{feedback_id}.json", record)
        await self.store.add(feedback_id, user_id, conversation_id, now.isoformat(), feedback)

    @property
    def directory(self) -> str:
        """Where the files go (LCORE names it in its 500)."""
        return str(Path(self._config.feedback_storage or "."))


def _write(path: Path, record: JsonObject) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(record), encoding="utf-8")
    partial.replace(path)   # whole or absent: a reader never sees half a file
