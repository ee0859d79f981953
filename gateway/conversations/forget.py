"""Deleting a conversation with everything the gateway stored for it and its state
upstream: one way for the client's `DELETE` and for the expiry sweep.

The database's part is a claim (`ConversationHistory.delete`): only the caller whose
transaction deleted the row goes on to delete the upstream state, so a conversation is
deleted once however many replicas try. The upstream's part comes after the commit:
an unreachable upstream does not keep the client's conversation alive in the gateway
(LCORE answers the delete too). What is to be deleted upstream is recorded in the
deleting transaction and removed once the upstream confirmed, so what could not be
deleted then (or when the process stopped in between) is retried when the gateway
starts, then every `RETRY_SECONDS`, by whichever replica leases it first, and at once
when a client deletes the conversation again (`finish`). The same round deletes again a
conversation that a turn still running when it was deleted recorded anew.

A client's `DELETE` learns whether the upstream's part failed for want of an upstream
(`Forgotten.unreachable`): LCORE deletes its own row, then answers its 503 when the
upstream cannot be reached, and so does the gateway (`http/conversations.py`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable

from gateway.schema.errors import ApiError
from gateway.storage.history import ConversationHistory, Deleted
from gateway.turns.turn import Backend

log = logging.getLogger("gateway.conversations")

# How often, and after how long, upstream deletions that failed are tried again.
RETRY_SECONDS = 60.0
# How long a deleted conversation's id is remembered: longer than any turn runs, so a
# turn that ends after its conversation was deleted cannot bring it back for good.
TOMBSTONE_SECONDS = 86400.0


@dataclass(frozen=True, slots=True)
class Forgotten:
    """A deletion done here: what it removed, and the error that left the upstream's
    part pending for want of an upstream (LCORE's 503), if it did."""

    deleted: Deleted
    unreachable: ApiError | None = None


def _unreachable(exc: ApiError) -> bool:
    return exc.status == 503 and exc.code == "upstream_unavailable"


class Forgetting:
    def __init__(self, history: ConversationHistory, backend: Callable[[], Awaitable[Backend]]):
        self._history = history
        self._backend = backend
        # Called with what was deleted, after the database's part (transcripts' files).
        self.also: list[Callable[[Deleted], Awaitable[None]]] = []
        self._task: asyncio.Task[Any] | None = None

    async def delete(self, conversation_id: str, idle_before: str | None = None) -> Forgotten | None:
        """Delete it, if this call claims it (None: nothing was deleted here)."""
        deleted = await self._history.delete(conversation_id, idle_before)
        if deleted is None:
            return None
        failure = await self._forget_upstream(deleted)
        for extra in self.also:
            try:
                await extra(deleted)
            except Exception:
                log.exception("conversation %s deleted; cleaning up after it failed", conversation_id)
        return Forgotten(deleted, failure if failure is not None and _unreachable(failure) else None)

    async def finish(self, conversation_id: str) -> ApiError | None:
        """A client deletes again a conversation deleted before: its upstream deletion,
        if still pending, is tried now; the error when the upstream is still unreachable."""
        now = datetime.now(timezone.utc).isoformat()
        pending = await self._history.pending_one(conversation_id, now)
        if pending is None:
            return None
        failure = await self._forget_upstream(pending)
        return failure if failure is not None and _unreachable(failure) else None

    async def _forget_upstream(self, deleted: Deleted) -> ApiError | None:
        """None once the upstream's part is done, else why it is still pending."""
        try:
            await (await self._backend()).forget_conversation(deleted.upstream_id, deleted.response_ids)
        except ApiError as exc:
            log.warning("conversation %s deleted; its upstream state was not, retried later (%s: %s)",
                        deleted.conversation_id, exc.response, exc.cause)
            return exc
        await self._history.upstream_deleted(deleted.conversation_id)
        return None

    async def retry(self, older_than: float = RETRY_SECONDS) -> int:
        """Delete the upstream state still pending (an upstream that was unreachable, a
        process that stopped before it got there) and conversations a turn brought back
        after they were deleted; how many upstream deletions were done now."""
        now = datetime.now(timezone.utc)
        for conversation_id in await self._history.resurrected():
            log.info("conversation %s was recorded again after it was deleted: deleted again", conversation_id)
            await self.delete(conversation_id)
        pending = await self._history.pending((now - timedelta(seconds=older_than)).isoformat(), now.isoformat())
        done = 0
        for deleted in pending:
            done += await self._forget_upstream(deleted) is None
        await self._history.prune((now - timedelta(seconds=TOMBSTONE_SECONDS)).isoformat())
        return done

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        # At start, whatever a stopped process left pending, however recently it tried.
        older_than = 0.0
        while True:
            try:
                await self.retry(older_than)
            except Exception:   # the database: the next round tries again
                log.exception("retrying upstream deletions failed")
            older_than = RETRY_SECONDS
            await asyncio.sleep(RETRY_SECONDS)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
