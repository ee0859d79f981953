"""The turns each user has running, leased per process, on a database several
processes share (replicas on PostgreSQL, workers on one SQLite file): the SQL of
`turns/in_progress.py`'s `SharedInProgress`.

A process holds a number of places per user (`slots`, its row), at least the turns it
runs for that user; the sum over the rows that have not expired never passes the
limit. Asking for more places locks the user's lock row (`process` ''), so two
processes asking at once are decided one after the other (a row lock on PostgreSQL;
SQLite's write transaction takes the whole file). Every change is relative
(`slots + n`), so a lease and a give-back sent at once commute. A process that stops
renewing its rows (it died) has them ignored once they expire, and deleted by the
next sweep.
"""

from __future__ import annotations

from typing import Sequence

from gateway.storage.database import Database, Params

_LOCK = ""   # the process of a user's lock row


class RunningTurnsStore:
    def __init__(self, db: Database, process: str):
        self._db = db
        self._process = process

    async def lease(self, user_id: str, more: int, limit: int, now_ms: int, expires_ms: int) -> int | None:
        """`more` places for this process, when the places every live process holds
        for the user leave room within `limit`: None then; else how many they hold
        (the refusal's count)."""
        key = {"u": user_id, "lock": _LOCK}
        async with self._db.transaction() as tx:
            await tx.execute("INSERT INTO gateway_running_turns (process, user_id, slots, expires_at) "
                             "VALUES (:lock, :u, 0, 0) ON CONFLICT (user_id, process) DO NOTHING", key)
            # Locks the user's row (PostgreSQL) until the transaction ends.
            await tx.execute("UPDATE gateway_running_turns SET slots = 0 WHERE user_id = :u AND process = :lock", key)
            row = await tx.fetchone("SELECT COALESCE(SUM(slots), 0) AS held FROM gateway_running_turns "
                                    "WHERE user_id = :u AND process <> :lock AND expires_at > :now",
                                    {**key, "now": now_ms})
            held = int(row["held"]) if row is not None else 0
            if held + more > limit:
                return held
            await tx.execute("INSERT INTO gateway_running_turns AS r (process, user_id, slots, expires_at) "
                             "VALUES (:p, :u, :n, :exp) ON CONFLICT (user_id, process) DO UPDATE SET "
                             "slots = r.slots + excluded.slots, expires_at = excluded.expires_at",
                             {"p": self._process, "u": user_id, "n": more, "exp": expires_ms})
        return None

    async def give_back(self, returned: Sequence[tuple[str, int]], expires_ms: int) -> None:
        """Places this process no longer uses (user, how many), its other rows renewed
        until `expires_ms`, rows left with none deleted, in one transaction."""
        statements: list[tuple[str, Params]] = [
            ("UPDATE gateway_running_turns SET slots = slots - :n WHERE process = :p AND user_id = :u",
             {"n": count, "p": self._process, "u": user_id}) for user_id, count in returned]
        statements.append(("DELETE FROM gateway_running_turns WHERE process = :p AND slots <= 0",
                           {"p": self._process}))
        statements.append(("UPDATE gateway_running_turns SET expires_at = :exp WHERE process = :p",
                           {"p": self._process, "exp": expires_ms}))
        await self._db.write(statements)

    async def sweep(self, now_ms: int) -> int:
        """Delete the expired rows of processes that stopped; how many."""
        return await self._db.execute("DELETE FROM gateway_running_turns WHERE process <> :lock AND expires_at <= :now",
                                      {"lock": _LOCK, "now": now_ms})

    async def forget(self) -> None:
        """At shutdown, once its turns ended: this process's rows."""
        await self._db.execute("DELETE FROM gateway_running_turns WHERE process = :p", {"p": self._process})
