"""Deleting a conversation with everything the gateway stored for it and its state
upstream: one way for the client's `DELETE` and for the expiry sweep.

The database's part is a claim (`ConversationHistory.delete`): only the caller whose
transaction deleted the row goes on to delete the upstream state, so a conversation is
deleted once however many replicas try. The upstream's part comes after the commit:
an unreachable upstream does not keep the client's conversation alive in the gateway
(LCORE answers the delete too); what could not be deleted there is logged.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from gateway.schema.errors import ApiError
from gateway.storage.history import ConversationHistory, Deleted
from gateway.turns.turn import Backend

log = logging.getLogger("gateway.conversations")


class Forgetting:
    def __init__(self, history: ConversationHistory, backend: Callable[[], Awaitable[Backend]]):
        self._history = history
        self._backend = backend
        # Called with what was deleted, after the database's part (transcripts' files).
        self.also: list[Callable[[Deleted], Awaitable[None]]] = []

    async def delete(self, conversation_id: str, idle_before: str | None = None) -> Deleted | None:
        """Delete it, if this call claims it (None: nothing was deleted here)."""
        deleted = await self._history.delete(conversation_id, idle_before)
        if deleted is None:
            return None
        try:
            await (await self._backend()).forget_conversation(deleted.upstream_id, deleted.response_ids)
        except ApiError as exc:
            log.warning("conversation %s deleted; its upstream state was not (%s: %s)", conversation_id,
                        exc.response, exc.cause)
        for extra in self.also:
            try:
                await extra(deleted)
            except Exception:
                log.exception("conversation %s deleted; cleaning up after it failed", conversation_id)
        return deleted
