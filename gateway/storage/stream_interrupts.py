"""Interrupts asked of the other processes on one SQLite file (workers: PostgreSQL
carries them by NOTIFY, `legacy/remote.py`): a row per question, its `outcome` written
by the process that runs the stream, deleted by the one that asked once answered (or
after it gave up waiting; rows older than a minute are swept)."""

from __future__ import annotations

from gateway.storage.database import Database

KEPT_MS = 60_000


class StreamInterruptsStore:
    def __init__(self, db: Database):
        self._db = db

    async def ask(self, ask: str, request_id: str, user_id: str, now_ms: int) -> None:
        await self._db.execute("INSERT INTO gateway_stream_interrupts (ask, request_id, user_id, outcome, created_at) "
                               "VALUES (:a, :r, :u, NULL, :now)", {"a": ask, "r": request_id, "u": user_id,
                                                                   "now": now_ms})

    async def outcome(self, ask: str) -> str | None:
        """The answer, once a process gave it."""
        row = await self._db.fetchone("SELECT outcome FROM gateway_stream_interrupts WHERE ask = :a", {"a": ask})
        return row["outcome"] if row is not None else None

    async def unanswered(self, since_ms: int) -> list[tuple[str, str, str]]:
        """(ask, request id, user id) of the questions asked since then, not yet answered."""
        rows = await self._db.fetchall("SELECT ask, request_id, user_id FROM gateway_stream_interrupts "
                                       "WHERE outcome IS NULL AND created_at > :since", {"since": since_ms})
        return [(row["ask"], row["request_id"], row["user_id"]) for row in rows]

    async def answer(self, ask: str, outcome: str) -> None:
        await self._db.execute("UPDATE gateway_stream_interrupts SET outcome = :o WHERE ask = :a AND outcome IS NULL",
                               {"o": outcome, "a": ask})

    async def forget(self, ask: str, now_ms: int) -> None:
        """The question answered or given up, and any left behind past `KEPT_MS`."""
        await self._db.write([("DELETE FROM gateway_stream_interrupts WHERE ask = :a", {"a": ask}),
                              ("DELETE FROM gateway_stream_interrupts WHERE created_at < :old",
                               {"old": now_ms - KEPT_MS})])
