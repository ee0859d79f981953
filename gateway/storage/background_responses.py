"""Background responses (both modes): who owns each, which process runs it, its status
and latest response object, and its stream's frames, so a client that lost its
connection resumes from a sequence number on any replica.

Frames are stored as the client receives them (`event:` + `data:` lines, numbered),
a row per batch (`first_seq`..`last_seq`): the runner writes one row per flush, not one
per event. `updated_at` (epoch ms) is the runner's heartbeat: a row left `in_progress`
by a process that stopped is found by its age and failed (`stale`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.schema.json_types import JsonObject
from gateway.storage.database import Database

RUNNING = ("queued", "in_progress")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class BackgroundRow:
    id: str
    user_id: str
    status: str
    response: dict[str, Any]
    runner: str
    cancel_requested: bool
    updated_at: int

    @property
    def running(self) -> bool:
        return self.status in RUNNING


_COLUMNS = "id, user_id, status, response, runner, cancel_requested, updated_at"
_EVENTS = "INSERT INTO gateway_background_events (response_id, first_seq, last_seq, frames) VALUES (?, ?, ?, ?)"


def _row(row: Any) -> BackgroundRow:
    return BackgroundRow(row["id"], row["user_id"], row["status"], orjson.loads(row["response"]), row["runner"],
                         bool(row["cancel_requested"]), int(row["updated_at"]))


def _events(response_id: str, first_seq: int, frames: bytes, count: int) -> tuple[str, tuple[str, int, int, str]]:
    # Frames are UTF-8 JSON; an upstream that broke that still gets its stream recorded.
    return _EVENTS, (response_id, first_seq, first_seq + count - 1, frames.decode(errors="replace"))


class BackgroundStore:
    def __init__(self, db: Database):
        self._db = db

    @property
    def shared(self) -> bool:
        return self._db.shared

    async def create(self, response: JsonObject, user_id: str, runner: str, frames: bytes, count: int) -> None:
        """The response as it starts, with its first frames (numbered from 0), in one
        transaction: a replica asked about it next finds both."""
        statements: list[tuple[str, Any]] = [(
            f"INSERT INTO gateway_background ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 0, ?)",
            (response["id"], user_id, response.get("status") or "in_progress", orjson.dumps(response).decode(),
             runner, now_ms()))]
        if count:
            statements.append(_events(response["id"], 0, frames, count))
        await self._db.write(statements)

    async def append(self, response_id: str, first_seq: int, frames: bytes, count: int) -> None:
        """A batch of frames (and the heartbeat)."""
        await self._db.write([_events(response_id, first_seq, frames, count),
                              ("UPDATE gateway_background SET updated_at = ? WHERE id = ?", (now_ms(), response_id))])

    async def finish(self, response: JsonObject, first_seq: int, frames: bytes, count: int) -> bool:
        """The last frames and the final object, unless the response already ended
        (False then: it was failed as stale, or cancelled by another replica)."""
        async with self._db.transaction() as tx:
            changed = await tx.execute(
                "UPDATE gateway_background SET status = ?, response = ?, updated_at = ? "
                "WHERE id = ? AND status IN ('queued', 'in_progress')",
                (response["status"], orjson.dumps(response).decode(), now_ms(), response["id"]))
            if changed and count:
                await tx.execute(*_events(response["id"], first_seq, frames, count))
            return changed > 0

    async def get(self, response_id: str, user_id: str) -> BackgroundRow | None:
        row = await self._db.fetchone(f"SELECT {_COLUMNS} FROM gateway_background WHERE id = ? AND user_id = ?",
                                      (response_id, user_id))
        return _row(row) if row is not None else None

    async def frames_after(self, response_id: str, after: int) -> list[tuple[int, bytes]]:
        """The stored batches holding events numbered above `after`, in order."""
        rows = await self._db.fetchall(
            "SELECT first_seq, frames FROM gateway_background_events WHERE response_id = ? AND last_seq > ? "
            "ORDER BY first_seq", (response_id, after))
        return [(int(row["first_seq"]), row["frames"].encode()) for row in rows]

    async def delete(self, response_id: str) -> None:
        await self._db.write([("DELETE FROM gateway_background_events WHERE response_id = ?", (response_id,)),
                              ("DELETE FROM gateway_background WHERE id = ?", (response_id,))])

    async def request_cancel(self, response_id: str) -> None:
        await self._db.execute("UPDATE gateway_background SET cancel_requested = 1 WHERE id = ?", (response_id,))

    async def cancel_requests(self, runner: str) -> list[str]:
        rows = await self._db.fetchall(
            "SELECT id FROM gateway_background WHERE runner = ? AND cancel_requested = 1 "
            "AND status IN ('queued', 'in_progress')", (runner,))
        return [row["id"] for row in rows]

    async def heartbeat(self, runner: str) -> None:
        await self._db.execute("UPDATE gateway_background SET updated_at = ? WHERE runner = ? "
                               "AND status IN ('queued', 'in_progress')", (now_ms(), runner))

    async def stale(self, older_than_ms: int | None) -> list[BackgroundRow]:
        """Unfinished responses whose runner has not been heard of since then (None: all)."""
        sql = f"SELECT {_COLUMNS} FROM gateway_background WHERE status IN ('queued', 'in_progress')"
        params: tuple[int, ...] = ()
        if older_than_ms is not None:
            sql += " AND updated_at < ?"
            params = (older_than_ms,)
        return [_row(row) for row in await self._db.fetchall(sql, params)]

    async def last_seq(self, response_id: str) -> int:
        """The number of the last stored event (-1: none)."""
        row = await self._db.fetchone("SELECT MAX(last_seq) AS n FROM gateway_background_events "
                                      "WHERE response_id = ?", (response_id,))
        return int(row["n"]) if row is not None and row["n"] is not None else -1
