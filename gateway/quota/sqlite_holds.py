"""The statements of `HoldsQuota` on a SQLite file shared by several worker processes
(`storage/sharing.py`): the same holds, spare and sweep as on PostgreSQL (`holds.py`,
`admission.py`), so quotas stay exact across processes (no lost update, nothing
overspent), written for SQLite, which has no `FOR UPDATE` and no data-changing CTEs.

Each admission, give-back and sweep is a `BEGIN IMMEDIATE` transaction
(`Database.transaction()`): SQLite lets one writer in at a time across processes, so
what it reads cannot change before it writes (the row locks of PostgreSQL's statements,
for the whole file). A batch's charges are plain statements the turn writer runs in its
own transaction: each balance charged, and what the turns held taken off `reserved`
and off this process's hold rows (nothing for a row the sweep deleted first).

A process alone on its file keeps the ledger in memory instead (`sqlite_ledger.py`):
no transaction of its own per admission.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Sequence

from gateway.quota.balances import iso, parse_iso
from gateway.quota.holds import ROOMY
from gateway.quota.store import QuotaStore, charge_rows
from gateway.storage.batch import Keyed

_RELEASE_BALANCE = ("UPDATE gateway_quota_balances SET reserved = reserved - :g WHERE limiter = :l AND subject = "
                    "(SELECT subject FROM gateway_quota_reservations WHERE id = :id AND limiter = :l)")
_RELEASE_HOLD = "UPDATE gateway_quota_reservations SET tokens = tokens - :g WHERE id = :id AND limiter = :l"


class SQLiteHoldsStore(QuotaStore):
    async def reserve(self, asked: Sequence[tuple[str, str, str, int, int]], now: datetime,
                      expires: datetime) -> dict[tuple[str, str], tuple[int, float]] | None:
        """As `QuotaStore.reserve`: all of the batch's balances or none."""
        stamp = iso(now)
        async with self.db.transaction() as tx:
            found = {}
            for _, limiter, subject, _, _ in asked:
                row = await tx.fetchone("SELECT available, reserved, next_refill FROM gateway_quota_balances "
                                        "WHERE limiter = :l AND subject = :s", {"l": limiter, "s": subject})
                if row is None or row["next_refill"] <= stamp:
                    return None   # missing or due a top-up: `bring_up_to_date` first
                left = int(row["available"]) - int(row["reserved"])
                found[(limiter, subject)] = (left, row["next_refill"])
            granted: dict[tuple[str, str], tuple[int, float]] = {}
            for hold_id, limiter, subject, need, want in asked:
                left, next_refill = found[(limiter, subject)]
                if left - need < 0:
                    return None   # short for the batch: nothing changed (no write yet)
                tokens = need + (want if left - need >= ROOMY * want else 0)
                granted[(limiter, subject)] = (tokens, parse_iso(next_refill).timestamp())
            for hold_id, limiter, subject, _, _ in asked:
                tokens = granted[(limiter, subject)][0]
                await tx.execute("UPDATE gateway_quota_balances SET reserved = reserved + :t "
                                 "WHERE limiter = :l AND subject = :s", {"t": tokens, "l": limiter, "s": subject})
                await tx.execute("INSERT INTO gateway_quota_reservations AS r (id, limiter, subject, tokens, expires_at) "
                                 "VALUES (:id, :l, :s, :t, :exp) ON CONFLICT (id, limiter) DO UPDATE SET "
                                 "tokens = r.tokens + excluded.tokens, expires_at = excluded.expires_at",
                                 {"id": hold_id, "l": limiter, "s": subject, "t": tokens, "exp": iso(expires)})
            return granted

    async def give_back(self, changes: Sequence[tuple[str, str, str, int, bool]], expires: datetime) -> set[str]:
        """As `QuotaStore.give_back`: the ids of the rows kept."""
        kept = set()
        async with self.db.transaction() as tx:
            for hold_id, limiter, _, back, gone in changes:
                row = await tx.fetchone("SELECT subject, tokens FROM gateway_quota_reservations "
                                        "WHERE id = :id AND limiter = :l", {"id": hold_id, "l": limiter})
                if row is None:
                    continue   # the sweep deleted it (and released its tokens)
                released = int(row["tokens"]) if gone else back
                if gone:
                    await tx.execute("DELETE FROM gateway_quota_reservations WHERE id = :id AND limiter = :l",
                                     {"id": hold_id, "l": limiter})
                else:
                    kept.add(hold_id)
                    await tx.execute("UPDATE gateway_quota_reservations SET tokens = tokens - :b, expires_at = :exp "
                                     "WHERE id = :id AND limiter = :l",
                                     {"b": back, "exp": iso(expires), "id": hold_id, "l": limiter})
                if released:
                    await tx.execute("UPDATE gateway_quota_balances SET reserved = reserved - :t "
                                     "WHERE limiter = :l AND subject = :s",
                                     {"t": released, "l": limiter, "s": row["subject"]})
        return kept

    async def sweep(self, now: datetime) -> int:
        """As `QuotaStore.sweep`: expired holds (a worker that stopped) released once;
        how many balances had some."""
        async with self.db.transaction() as tx:
            rows = await tx.fetchall("SELECT limiter, subject, SUM(tokens) AS tokens FROM gateway_quota_reservations "
                                     "WHERE expires_at <= :now GROUP BY limiter, subject", {"now": iso(now)})
            if not rows:
                return 0
            await tx.execute("DELETE FROM gateway_quota_reservations WHERE expires_at <= :now", {"now": iso(now)})
            for row in rows:
                await tx.execute("UPDATE gateway_quota_balances SET reserved = reserved - :t "
                                 "WHERE limiter = :l AND subject = :s",
                                 {"t": int(row["tokens"]), "l": row["limiter"], "s": row["subject"]})
            return len(rows)

    def charges(self, tokens: dict[tuple[str, str], int], released: dict[tuple[str, str], int]) -> list[Keyed]:
        """Each balance charged; each hold row (id, limiter name) and its balance's
        `reserved` lose what the turns held, when the row is still there."""
        stamp = iso(datetime.now(timezone.utc))
        statements = charge_rows(tokens)
        for (hold_id, name), held in released.items():
            params = {"g": held, "id": hold_id, "l": name, "now": stamp}
            statements.append((f"hold\0{name}\0{hold_id}\0a", _RELEASE_BALANCE, params))
            statements.append((f"hold\0{name}\0{hold_id}\0b", _RELEASE_HOLD, params))
        return statements
