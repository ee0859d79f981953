"""The local engine's response store: one row per stored response, scoped to its owner.

A row is written when the response is created (`in_progress`), after each tool round
and at the end (upserted in place, so its creation order `seq` is kept), which is what
lets `GET /v1/responses/{id}` show a stream's progress. `context` is the whole item
history through the response (earlier turns, this input, this output): a continuation
by `previous_response_id` or by conversation reads that one row. It grows with the
conversation; compaction of long histories belongs with the compaction issue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson

from gateway.schema.json_types import JsonObject
from gateway.storage.database import Database, committed

log = logging.getLogger("gateway.storage")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    user_id: str
    response: dict[str, Any]
    input: list[dict[str, Any]]
    context: list[dict[str, Any]]


_UPSERT = ("INSERT INTO gateway_responses (id, seq, user_id, status, response, input, context) "
           "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
           "response = excluded.response, context = excluded.context")


def _json(value: Any) -> str:
    # Text, not bytes: one column type on both engines (SQLite TEXT, PostgreSQL TEXT).
    return orjson.dumps(value).decode()


# What a save writes, taken when the row is written: the response, this request's
# input items and the whole item history through the response.
Snapshot = Callable[[], tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]]


class ResponseStore:
    """Saves are group-committed: while one write is in the database's thread, the saves
    that arrive queue and go together in the next transaction (a trip to that thread
    costs more CPU than a row), with no waiting when there is no queue. A response saved
    again before its queued save was written is written once, in its newer state (a
    short stream's creation and end are often one row write)."""

    def __init__(self, db: Database):
        self._db = db
        self._queued: dict[str, tuple[str, Snapshot, list[asyncio.Future[Any]]]] = {}
        self._writing = False
        # The drain running, held: the event loop keeps only a weak reference to a task.
        self._drainer: asyncio.Future[None] | None = None
        self._last_seq = 0

    def save(self, response_id: str, user_id: str, snapshot: Snapshot, *, wait: bool) -> "asyncio.Future[Any] | None":
        """Queue an insert or update of the response. `wait`: returns a future that
        resolves once it is committed (else nothing: it is written as soon as it can be)."""
        queued = self._queued.get(response_id)
        waiters = queued[2] if queued is not None else []
        self._queued[response_id] = (user_id, snapshot, waiters)
        done = None
        if wait:
            done = asyncio.get_running_loop().create_future()
            waiters.append(done)
        if not self._writing:
            self._writing = True
            self._drainer = asyncio.ensure_future(self._drain())
        return done

    async def _drain(self) -> None:
        try:
            while self._queued:
                batch, self._queued = self._queued, {}
                rows = []
                for response_id, (user_id, snapshot, _) in batch.items():
                    response, input_, context = snapshot()
                    rows.append((_UPSERT, (response_id, self._next_seq(), user_id, response["status"],
                                           _json(response), _json(input_), _json(context))))
                error: Exception | None = None
                try:
                    await self._db.write(rows)
                except Exception as exc:
                    log.error("saving %d responses failed: %s", len(rows), exc)
                    error = exc
                for _, _, waiters in batch.values():
                    for done in waiters:
                        committed(done, error)
        finally:
            self._writing = False

    def _next_seq(self) -> int:
        """Creation order: the time in nanoseconds, strictly increasing in this process
        (an update keeps the row's first `seq`). Replicas sharing a database order their
        responses by their clocks, as OpenAI lists by `created_at`."""
        self._last_seq = max(time.time_ns(), self._last_seq + 1)
        return self._last_seq

    async def get(self, response_id: str, user_id: str) -> StoredResponse | None:
        """The response if it exists and belongs to `user_id` (None otherwise: another
        user's response is indistinguishable from a missing one)."""
        row = await self._db.fetchone("SELECT id, user_id, response, input, context FROM gateway_responses "
                                      "WHERE id = ? AND user_id = ?", (response_id, user_id))
        if row is None:
            return None
        return StoredResponse(row["id"], row["user_id"], orjson.loads(row["response"]), orjson.loads(row["input"]),
                              orjson.loads(row["context"]))

    async def delete(self, response_id: str, user_id: str) -> bool:
        return await self._db.execute("DELETE FROM gateway_responses WHERE id = ? AND user_id = ?",
                                      (response_id, user_id)) > 0

    async def list(self, user_id: str, *, after: str | None, limit: int, descending: bool,
                   ) -> tuple[list[JsonObject], bool] | None:
        """A page of the user's responses in creation order, and whether more follow;
        None when `after` names no response of the user."""
        bound = ""
        params: list[Any] = [user_id]
        if after is not None:
            row = await self._db.fetchone("SELECT seq FROM gateway_responses WHERE id = ? AND user_id = ?",
                                          (after, user_id))
            if row is None:
                return None
            bound = f" AND seq {'<' if descending else '>'} ?"
            params.append(row["seq"])
        rows = await self._db.fetchall(
            f"SELECT response FROM gateway_responses WHERE user_id = ?{bound} ORDER BY seq {'DESC' if descending else 'ASC'} "
            "LIMIT ?", (*params, limit + 1))
        return [orjson.loads(row["response"]) for row in rows[:limit]], len(rows) > limit
