"""Conversation expiry (issue 22; asked of LCORE by its users, not built there): with
`conversation_expiry.idle_ttl_seconds`, a conversation without a turn for that long
answers as an unknown one at once (`storage/history.py`'s `expired`), and a sweep every
`sweep_interval_seconds` deletes it with everything the gateway stored for it and its
upstream state (`Forgetting`).

Several replicas sweep the same database; each deletion is a claim on the
conversation's row that also re-checks that it is still idle, so exactly one replica
deletes each conversation (and its upstream state), and a conversation continued
between the sweep's read and its claim is kept. Time is the database's clock.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from datetime import timedelta, timezone

from gateway.config import ConversationExpiryConfig
from gateway.conversations.forget import Forgetting
from gateway.storage.database import Database
from gateway.storage.history import ConversationHistory

log = logging.getLogger("gateway.conversations")

# Conversations deleted per read of the candidates (a sweep reads again until none are left).
_BATCH = 100


class ExpirySweep:
    def __init__(self, config: ConversationExpiryConfig, db: Database, history: ConversationHistory,
                 forgetting: Forgetting):
        self._ttl = config.idle_ttl_seconds
        self._interval = config.sweep_interval_seconds
        self._db = db
        self._history = history
        self._forgetting = forgetting
        self._task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        if self._ttl is not None:
            self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.sweep()
            except Exception:   # a database hiccup: the next sweep tries again
                log.exception("conversation expiry sweep failed")

    async def sweep(self) -> int:
        """Delete what is past the TTL now; how many this replica deleted."""
        assert self._ttl is not None
        cutoff = ((await self._db.now()) - timedelta(seconds=self._ttl)).astimezone(timezone.utc).isoformat()
        deleted = 0
        while True:
            candidates = await self._history.idle(cutoff, _BATCH)
            for conversation_id in candidates:
                if await self._forgetting.delete(conversation_id, idle_before=cutoff) is not None:
                    deleted += 1
                    log.info("conversation %s expired: deleted", conversation_id)
            if len(candidates) < _BATCH:
                return deleted
