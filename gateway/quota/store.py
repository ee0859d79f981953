"""The SQL of quotas (migration 4's tables).

Admission (`reserve`, PostgreSQL: several replicas share the balances; SQLite keeps
them in the process, `ledger.py`) is one statement, so one round trip: it locks the
batch's balance rows in lock order (`SELECT … FOR UPDATE`, which under READ COMMITTED
returns each row as the last transaction that held it left it), and only if every one
is not due a top-up and has `available - reserved >= tokens` adds the tokens (and a
spare, when there is plenty of room) to `reserved` and to this replica's hold row
(`holds.py`: one per replica and balance, with an expiry). So a turn reserves on every
limiter or on none, and no two admissions spend the same tokens. A missing row or a due
top-up is handled by `bring_up_to_date` (a transaction that creates rows and applies
elapsed periods once) before a second try.

The charge (`charge_batch`, for a batch of turns) subtracts the turns' tokens and takes
what they held off their holds' rows and off `reserved` in the same statement; a dead
replica's rows are deleted by the expiry sweep, which takes their tokens off `reserved`
as it does, so a reservation is released once whichever gets there first. The turn writer commits
charges in the same transaction as the turn's record when both live in one database.
Every statement that locks balance rows takes them in `balance_key` order, so
concurrent transactions cannot deadlock.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any, Iterable, NamedTuple, Sequence, TypedDict

import orjson

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import (BALANCE_MAX, BALANCE_MIN, BalanceState, Held, Pair, balance_key, brought_up_to_date,
                                    iso, parse_iso)
from gateway.quota.holds import ROOMY
from gateway.storage.batch import Keyed
from gateway.storage.database import SHARES_TRIP, Database, Transaction

_COLUMNS = "available, anchor, periods, period, next_refill"

# A balance is a signed 64-bit integer (BIGINT): past it PostgreSQL refuses the update
# and SQLite silently stores a REAL, while the process keeps the exact value; admin
# changes past it are refused, top-ups stop at it (balances.py).

class BalanceOutOfRange(ValueError):
    """An admin change would take a balance out of BALANCE_MIN..BALANCE_MAX; nothing changed."""

    def __init__(self, limiter: str, subject: str):
        super().__init__(f"the balance of {limiter} for {subject!r} would leave a signed 64-bit integer")
        self.limiter = limiter
        self.subject = subject


class UsageSum(TypedDict):
    """The token history of one user, provider and model summed over days (the quota
    API's `GET /v1/quotas/usage` rows, `quota/admin.py`)."""
    user_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    first_day: str
    last_day: str


class Usage(NamedTuple):
    """A turn's row of token history (`enable_token_history`), summed per UTC day."""

    user_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    day: date


def _state(row: Any) -> BalanceState:
    return BalanceState(int(row["available"]), parse_iso(row["anchor"]), int(row["periods"]), row["period"],
                        parse_iso(row["next_refill"]))


# SQLite: one balance row's charges in a batch.
_CHARGE = ("UPDATE gateway_quota_balances SET available = available - :t, updated_at = :now "
           "WHERE limiter = :l AND subject = :s")
# PostgreSQL: a batch's charges as one statement, the charges (`:c`) and what the turns
# held (`:g`, per hold row: `holds.py`) each one JSON text (asyncpg encodes an array
# element by element). The balance rows are locked in lock order first (the scalar
# subquery runs before any row is updated), then each is charged its sum, and the hold
# rows and `reserved` lose what the turns held (nothing for a row the expiry sweep got
# to first); it returns the balance rows as they are then (`HoldsQuota.committed`
# keeps them: no read after the batch). Independent of the turn records before it, so
# it shares the last one's round trip (`SHARES_TRIP`).
_CHARGE_BATCH = (
    SHARES_TRIP + "WITH charges AS (SELECT c->>0 AS limiter, c->>1 AS subject, CAST(c->>2 AS BIGINT) AS tokens "
    "FROM json_array_elements(CAST(:c AS JSON)) AS c), "
    "locked AS (SELECT b.limiter FROM gateway_quota_balances b JOIN charges c "
    "ON b.limiter = c.limiter AND b.subject = c.subject "
    'ORDER BY b.limiter COLLATE "C", b.subject COLLATE "C" FOR UPDATE OF b), '
    "gone AS (UPDATE gateway_quota_reservations r SET tokens = r.tokens - CAST(g->>2 AS BIGINT) "
    "FROM json_array_elements(CAST(:g AS JSON)) AS g WHERE r.id = g->>0 AND r.limiter = g->>1 "
    "AND (SELECT COUNT(*) FROM locked) >= 0 RETURNING r.limiter, r.subject, CAST(g->>2 AS BIGINT) AS tokens), "
    "held AS (SELECT limiter, subject, SUM(tokens) AS tokens FROM gone GROUP BY limiter, subject) "
    "UPDATE gateway_quota_balances b SET available = b.available - c.tokens, "
    "reserved = b.reserved - COALESCE(h.tokens, 0), updated_at = :now "
    "FROM charges c LEFT JOIN held h ON h.limiter = c.limiter AND h.subject = c.subject "
    "WHERE b.limiter = c.limiter AND b.subject = c.subject AND (SELECT COUNT(*) FROM locked) >= 0 "
    f"RETURNING b.limiter, b.subject, b.reserved, {', '.join('b.' + c for c in _COLUMNS.split(', '))}")
_USAGE = ("INSERT INTO gateway_token_usage AS u (user_id, provider, model, day, input_tokens, output_tokens) "
          "VALUES (:u, :p, :m, :d, :i, :o) ON CONFLICT (user_id, provider, model, day) DO UPDATE SET "
          "input_tokens = u.input_tokens + excluded.input_tokens, "
          "output_tokens = u.output_tokens + excluded.output_tokens")


class QuotaStore:
    def __init__(self, db: Database):
        self.db = db

    async def reserve(self, asked: Sequence[tuple[str, str, str, int, int]], now: datetime,
                      expires: datetime) -> dict[tuple[str, str], tuple[int, float]] | None:
        """Admission (PostgreSQL) of a batch of turns, in one statement: `asked` is, per
        balance the batch reserves on, (hold id, limiter name, subject, the batch's
        need, the spare wanted). When every balance exists, is not due a top-up and has
        room for its need, each gets its need, plus the spare when it has `ROOMY` times
        room for that, added to `reserved` and to this replica's hold row (`holds.py`);
        returns what each balance's hold got and when its next top-up falls due (a
        timestamp), by (limiter name, subject). Else None and nothing changes (a row
        missing or due a top-up, or short for the batch: its turns then try alone,
        `admission.py`)."""
        rows = await self.db.fetchall(
            # One JSON text, not five arrays: asyncpg encodes an array element by element (~0.5 µs each).
            "WITH asked AS (SELECT a->>0 AS id, a->>1 AS limiter, a->>2 AS subject, CAST(a->>3 AS BIGINT) AS need, "
            "CAST(a->>4 AS BIGINT) AS want FROM json_array_elements(CAST(:a AS JSON)) AS a), "
            "locked AS (SELECT b.limiter, b.subject, b.available, b.reserved, b.next_refill "
            "FROM gateway_quota_balances b WHERE (b.limiter, b.subject) IN (SELECT limiter, subject FROM asked) "
            # Byte order, as Python sorts `balance_key`: the lock order of every transaction.
            'ORDER BY b.limiter COLLATE "C", b.subject COLLATE "C" FOR UPDATE), '
            "sized AS (SELECT a.id, a.limiter, a.subject, l.next_refill, l.available - l.reserved - a.need AS left_over, "
            f"a.need + CASE WHEN l.available - l.reserved - a.need >= {ROOMY} * a.want THEN a.want ELSE 0 END "
            "AS tokens FROM asked a JOIN locked l USING (limiter, subject)), "
            "fine AS (SELECT COUNT(*) = (SELECT COUNT(*) FROM asked) AS ok FROM sized "
            "WHERE next_refill > :now AND left_over >= 0), "
            "taken AS (UPDATE gateway_quota_balances b SET reserved = b.reserved + s.tokens FROM sized s, fine "
            "WHERE fine.ok AND b.limiter = s.limiter AND b.subject = s.subject RETURNING 1), "
            "held AS (INSERT INTO gateway_quota_reservations AS r (id, limiter, subject, tokens, expires_at) "
            "SELECT s.id, s.limiter, s.subject, s.tokens, :exp FROM sized s, fine WHERE fine.ok "
            "ON CONFLICT (id, limiter) DO UPDATE SET tokens = r.tokens + excluded.tokens, "
            "expires_at = excluded.expires_at RETURNING 1) "
            "SELECT s.limiter, s.subject, s.tokens, s.next_refill FROM sized s, fine WHERE fine.ok",
            {"a": orjson.dumps(asked).decode(), "now": iso(now), "exp": iso(expires)})
        if not rows:
            return None
        return {(row["limiter"], row["subject"]): (int(row["tokens"]), parse_iso(row["next_refill"]).timestamp())
                for row in rows}

    def charges(self, tokens: dict[tuple[str, str], int], released: dict[tuple[str, str], int]) -> list[Keyed]:
        """A batch's charges on holds (`HoldsQuota.statements`): one statement
        (`charge_batch`); SQLite's are `sqlite_holds.py`'s."""
        return [charge_batch(tokens, released)]

    async def give_back(self, changes: Sequence[tuple[str, str, str, int, bool]], expires: datetime) -> set[str]:
        """Holds given back (`Holds.tick`): per hold (id, limiter name, subject, tokens,
        delete), its row loses `tokens` and has its expiry renewed, or is deleted, and
        `reserved` on the balance loses what left the row, in one statement (balance
        rows locked first, in lock order). Returns the ids of the rows kept (a row the
        sweep deleted is missing)."""
        rows = await self.db.fetchall(
            "WITH h AS (SELECT h->>0 AS id, h->>1 AS limiter, CAST(h->>3 AS BIGINT) AS back, "
            "CAST(h->>4 AS BOOLEAN) AS gone FROM json_array_elements(CAST(:h AS JSON)) AS h), "
            "locked AS (SELECT b.limiter FROM gateway_quota_balances b JOIN gateway_quota_reservations r "
            "ON r.limiter = b.limiter AND r.subject = b.subject JOIN h ON r.id = h.id AND r.limiter = h.limiter "
            'ORDER BY b.limiter COLLATE "C", b.subject COLLATE "C" FOR UPDATE OF b), '
            "deleted AS (DELETE FROM gateway_quota_reservations r USING h WHERE h.gone AND r.id = h.id "
            "AND r.limiter = h.limiter AND (SELECT COUNT(*) FROM locked) >= 0 "
            "RETURNING r.id, r.limiter, r.subject, r.tokens), "
            "kept AS (UPDATE gateway_quota_reservations r SET tokens = r.tokens - h.back, expires_at = :exp FROM h "
            "WHERE NOT h.gone AND r.id = h.id AND r.limiter = h.limiter AND (SELECT COUNT(*) FROM locked) >= 0 "
            "RETURNING r.id, r.limiter, r.subject, h.back AS tokens), "
            "sums AS (SELECT limiter, subject, SUM(tokens) AS tokens FROM "
            "(SELECT limiter, subject, tokens FROM deleted UNION ALL SELECT limiter, subject, tokens FROM kept) x "
            "GROUP BY limiter, subject), "
            "released AS (UPDATE gateway_quota_balances b SET reserved = b.reserved - sums.tokens FROM sums "
            "WHERE b.limiter = sums.limiter AND b.subject = sums.subject RETURNING 1) "
            "SELECT id FROM kept",
            {"h": orjson.dumps(changes).decode(), "exp": iso(expires)})
        return {row["id"] for row in rows}

    async def bring_up_to_date(self, pairs: Sequence[Pair], now: datetime) -> list[Held]:
        """Create missing balance rows and apply elapsed periods (each once), in one
        transaction; what each balance holds afterwards."""
        async with self.db.transaction() as tx:
            return [await self._up_to_date(tx, limiter, subject, now) for limiter, subject in pairs]

    async def _up_to_date(self, tx: Transaction, limiter: QuotaLimiterConfig, subject: str,
                          now: datetime) -> Held:
        fresh = BalanceState.new(limiter, now)
        key = {"l": limiter.name, "s": subject, "now": iso(now)}
        await tx.execute(
            f"INSERT INTO gateway_quota_balances (limiter, subject, {_COLUMNS}, updated_at) "
            "VALUES (:l, :s, :a, :anchor, 0, :p, :next, :now) ON CONFLICT (limiter, subject) DO NOTHING",
            {**key, "a": fresh.available, "anchor": iso(fresh.anchor), "p": fresh.period,
             "next": iso(fresh.next_refill)})
        # Locks the row (PostgreSQL) until the transaction ends: no top-up is applied twice.
        await tx.execute("UPDATE gateway_quota_balances SET available = available "
                         "WHERE limiter = :l AND subject = :s", key)
        row = await tx.fetchone(f"SELECT {_COLUMNS}, reserved FROM gateway_quota_balances "
                                "WHERE limiter = :l AND subject = :s", key)
        assert row is not None
        before = _state(row)
        after = brought_up_to_date(before, limiter, now)
        if after != before:
            await tx.execute("UPDATE gateway_quota_balances SET available = :a, anchor = :anchor, periods = :n, "
                             "period = :p, next_refill = :next, updated_at = :now WHERE limiter = :l AND subject = :s",
                             {**key, "a": after.available, "anchor": iso(after.anchor), "n": after.periods,
                              "p": after.period, "next": iso(after.next_refill)})
        return Held(limiter, subject, after, int(row["reserved"]))

    @staticmethod
    def held_from(rows: Sequence[Any], named: dict[str, QuotaLimiterConfig], now: datetime) -> list[Held]:
        """Balance rows (with `reserved`) as `read()` gives them, for configured limiters."""
        return [Held(named[row["limiter"]], row["subject"], brought_up_to_date(_state(row), named[row["limiter"]], now),
                     int(row["reserved"])) for row in rows if row.get("limiter") in named and "next_refill" in row]

    async def read(self, pairs: Sequence[Pair], now: datetime) -> list[Held]:
        """The balances as of `now` without writing, in one query (a due top-up is shown
        applied; it is stored by the next admission). A subject never seen has
        `initial_quota`."""
        params: dict[str, Any] = {}
        rows = await self.db.fetchall(f"SELECT b.limiter, b.subject, b.reserved, "
                                      f"{', '.join('b.' + c for c in _COLUMNS.split(', '))} "
                                      f"FROM gateway_quota_balances b WHERE {_pairs_sql(pairs, params, 'b')}", params)
        found = {(row["limiter"], row["subject"]): row for row in rows}
        held = []
        for limiter, subject in pairs:
            row = found.get((limiter.name, subject))
            state = _state(row) if row is not None else BalanceState.new(limiter, now)
            held.append(Held(limiter, subject, brought_up_to_date(state, limiter, now),
                             int(row["reserved"]) if row is not None else 0))
        return held

    async def sweep(self, now: datetime) -> int:
        """Release holds past their expiry (PostgreSQL: a replica that stopped renewing
        them): each row deleted once, its tokens taken off `reserved`."""
        return await self.db.execute(
            "WITH gone AS (DELETE FROM gateway_quota_reservations WHERE expires_at <= :now "
            "RETURNING limiter, subject, tokens), "
            "sums AS (SELECT limiter, subject, SUM(tokens) AS tokens FROM gone GROUP BY limiter, subject) "
            "UPDATE gateway_quota_balances b SET reserved = b.reserved - sums.tokens FROM sums "
            "WHERE b.limiter = sums.limiter AND b.subject = sums.subject", {"now": iso(now)})

    async def change(self, pairs: Sequence[tuple[Pair, int]], now: datetime, *, add: bool,
                     idempotency: tuple[str, str, str, str] | None = None) -> bool:
        """Set (or add to) balances, after bringing them up to date, in one transaction.
        `idempotency` = (key, subject, admin, what): a key seen before for that subject
        changes nothing and returns False. Raises `BalanceOutOfRange` (the transaction,
        the key's row included, rolled back) when a balance as this transaction read it
        would leave a signed 64-bit integer."""
        async with self.db.transaction() as tx:
            if idempotency is not None:
                key, subject, admin, what = idempotency
                if not await tx.execute(
                        "INSERT INTO gateway_quota_increments (idempotency_key, subject, admin, tokens, applied_at) "
                        "VALUES (:k, :s, :a, :t, :now) ON CONFLICT (idempotency_key, subject) DO NOTHING",
                        {"k": key, "s": subject, "a": admin, "t": what, "now": iso(now)}):
                    return False
            for (limiter, subject), value in sorted(pairs, key=lambda entry: balance_key(entry[0])):
                held = await self._up_to_date(tx, limiter, subject, now)   # locks the row until the end
                if not BALANCE_MIN <= (held.state.available + value if add else value) <= BALANCE_MAX:
                    raise BalanceOutOfRange(limiter.name, subject)
                await tx.execute(f"UPDATE gateway_quota_balances SET available = {'available + ' if add else ''}:v, "
                                 "updated_at = :now WHERE limiter = :l AND subject = :s",
                                 {"v": value, "now": iso(now), "l": limiter.name, "s": subject})
        return True

    async def usage(self, start: str, end: str, user_id: str | None) -> list[UsageSum]:
        """Token history summed per user, provider and model over UTC days start..end."""
        where = "day >= :start AND day <= :end" + (" AND user_id = :u" if user_id is not None else "")
        rows = await self.db.fetchall(
            "SELECT user_id, provider, model, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
            f"MIN(day) AS first_day, MAX(day) AS last_day FROM gateway_token_usage WHERE {where} "
            "GROUP BY user_id, provider, model ORDER BY user_id, provider, model",
            {"start": start, "end": end, "u": user_id} if user_id is not None else {"start": start, "end": end})
        return [UsageSum(user_id=row["user_id"], provider=row["provider"], model=row["model"],
                         input_tokens=int(row["input_tokens"]), output_tokens=int(row["output_tokens"]),
                         first_day=row["first_day"], last_day=row["last_day"]) for row in rows]


def _pairs_sql(pairs: Sequence[Pair], params: dict[str, Any], alias: str) -> str:
    """`(alias.limiter = … AND alias.subject = …) OR …` for the pairs, adding their params."""
    wanted = []
    for index, (limiter, subject) in enumerate(pairs):
        params[f"l{index}"], params[f"s{index}"] = limiter.name, subject
        wanted.append(f"({alias}.limiter = :l{index} AND {alias}.subject = :s{index})")
    return "(" + " OR ".join(wanted) + ")"


# A batch's charges, made statements (`LedgerQuota.statements`, `HoldsQuota.statements`):
# by then summed per balance row (limiter name, subject) and per usage row. Keyed by
# lock order (`storage.batch.Keyed`).

def charge_rows(tokens: dict[tuple[str, str], int]) -> list[Keyed]:
    """SQLite: one statement per balance row charged."""
    stamp = iso(datetime.now(timezone.utc))   # `updated_at` only: the process clock will do
    return [(f"balance\0{name}\0{subject}", _CHARGE, {"t": charged, "now": stamp, "l": name, "s": subject})
            for (name, subject), charged in tokens.items()]


def charge_batch(tokens: dict[tuple[str, str], int], released: dict[tuple[str, str], int]) -> Keyed:
    """PostgreSQL: every balance row charged and what the turns' holds release (by
    hold row: id, limiter name) as one statement (`_CHARGE_BATCH`: one round trip, where
    a statement per row cost ~45 µs of the gateway's CPU per row)."""
    first = min(tokens)
    return (f"balance\0{first[0]}\0{first[1]}", _CHARGE_BATCH,
            {"c": orjson.dumps([[name, subject, charged] for (name, subject), charged in tokens.items()]).decode(),
             "g": orjson.dumps([[hold, name, held] for (hold, name), held in released.items()]).decode(),
             "now": iso(datetime.now(timezone.utc))})


def usage_rows(usages: Iterable[Usage | None]) -> list[Keyed]:
    """One token-history upsert per (user, provider, model, day) of these charges."""
    rows: dict[tuple[str, str, str, str], list[int]] = {}
    for usage in usages:
        if usage is not None:
            row = rows.setdefault((usage.user_id, usage.provider, usage.model, usage.day.isoformat()), [0, 0])
            row[0] += usage.input_tokens
            row[1] += usage.output_tokens
    return [(f"usage\0{user}\0{provider}\0{model}\0{day}", _USAGE,
             {"u": user, "p": provider, "m": model, "d": day, "i": used[0], "o": used[1]})
            for (user, provider, model, day), used in rows.items()]
