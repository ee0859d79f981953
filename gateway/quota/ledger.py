"""Balances kept in memory, for a quota database only this process writes (SQLite).

SQLite serves one gateway process (DESIGN decision 3; the conversations repository
caches on the same ground), so that process can decide admission on its own: each
balance is loaded once (created, and brought up to date, by `QuotaStore`), checked and
reserved in the event loop with no await between the check and the reservation (so
concurrent requests cannot both spend the same tokens), and every change is written to
the database as a relative update (`available = available ± n`), which commutes with
the charges still queued in the turn writer. Reservations live in the process: when it
stops they end with it, and nothing else can be holding them. This is what lets a turn
with quotas cost about what one without does (bench/quota.py); on PostgreSQL several
replicas share the balances, and admission goes to the database (`QuotaStore.reserve`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from datetime import datetime
from typing import Sequence

from gateway.quota.balances import BalanceState, brought_up_to_date, iso
from gateway.quota.store import Held, Pair, QuotaStore, balance_key
from gateway.storage.writer import Keyed

Key = tuple[str, str]   # (limiter name, subject)


# Balances kept, least recently used first out (~200 bytes each). One with a
# reservation is never dropped; one whose last charge is still queued in the turn writer
# (milliseconds) would have to be the least recently used of this many to be.
_CACHED = 20000


class Ledger:
    def __init__(self, store: QuotaStore):
        self._store = store
        self._balances: OrderedDict[Key, BalanceState] = OrderedDict()
        self._reserved: dict[Key, int] = {}

    async def load(self, pairs: Sequence[Pair], now: datetime) -> None:
        """Make sure every pair's balance is in memory (the first use reads or creates it),
        as the most recently used."""
        missing = []
        for pair in pairs:
            key = (pair[0].name, pair[1])
            if key in self._balances:
                self._balances.move_to_end(key)
            else:
                missing.append(pair)
        if missing:
            for held in await self._store.bring_up_to_date(missing, now):
                self._balances.setdefault((held.limiter.name, held.subject), held.state)
            self._evict()

    def _evict(self) -> None:
        for key in list(self._balances)[:max(0, len(self._balances) - _CACHED)]:
            if key not in self._reserved:
                del self._balances[key]

    def reserve(self, pairs: Sequence[Pair], tokens: int, now: datetime) -> tuple[Held | None, list]:
        """Reserve `tokens` on every pair, or on none: (the first pair without room,
        or None; the statements that persist top-ups applied on the way). No await."""
        statements: list[Keyed] = []
        states = [self._current(limiter, subject, now, statements) for limiter, subject in pairs]
        reserved = self._reserved
        for (limiter, subject), state in zip(pairs, states):
            if state.available - reserved.get((limiter.name, subject), 0) < tokens:
                return Held(limiter, subject, state, reserved.get((limiter.name, subject), 0)), statements
        for limiter, subject in pairs:
            key = (limiter.name, subject)
            reserved[key] = reserved.get(key, 0) + tokens
        return None, statements

    def settle(self, pairs: Sequence[Pair], reserved: int, charge: int) -> None:
        """End a reservation of `reserved` tokens, charging `charge` (written by the caller)."""
        for limiter, subject in pairs:
            key = (limiter.name, subject)
            left = self._reserved.get(key, 0) - reserved
            if left:
                self._reserved[key] = left
            else:
                self._reserved.pop(key, None)
            self.shift((limiter, subject), -charge)

    def shift(self, pair: Pair, delta: int) -> None:
        """Add `delta` to a cached balance (what a relative update wrote). In place: the
        ledger's states are its own (`read` and `available` hand out copies or numbers)."""
        state = self._balances.get((pair[0].name, pair[1]))
        if state is not None:
            state.available += delta

    def delta(self, pair: Pair, now: datetime, value: int, add: bool, statements: list[Keyed]) -> int:
        """What an admin change adds to a balance, after any due top-up (persisted by
        `statements`); applied with `shift` once written."""
        state = self._current(pair[0], pair[1], now, statements)
        return value if add else value - state.available

    def read(self, pairs: Sequence[Pair], now: datetime) -> list[Held]:
        """The balances as of `now` (a due top-up shown applied), without changing them."""
        return [Held(limiter, subject, replace(brought_up_to_date(self._balances[(limiter.name, subject)], limiter, now)),
                     self._reserved.get((limiter.name, subject), 0)) for limiter, subject in pairs]

    def available(self, pairs: Sequence[Pair], now: datetime) -> list[int]:
        """`read()`'s available tokens alone (`available_quotas` after every turn)."""
        return [brought_up_to_date(self._balances[(limiter.name, subject)], limiter, now).available
                for limiter, subject in pairs]

    def forget(self, pairs: Sequence[Pair]) -> None:
        """Drop cached balances (a write failed): the next use reads the database again."""
        for limiter, subject in pairs:
            self._balances.pop((limiter.name, subject), None)

    def _current(self, limiter, subject: str, now: datetime, statements: list[Keyed]) -> BalanceState:
        key = (limiter.name, subject)
        before = self._balances[key]
        self._balances.move_to_end(key)
        after = brought_up_to_date(before, limiter, now)
        if after is not before and after != before:
            self._balances[key] = after
            statements.append((
                balance_key((limiter, subject)),
                "UPDATE gateway_quota_balances SET available = available + :delta, anchor = :anchor, periods = :n, "
                "period = :p, next_refill = :next, updated_at = :now WHERE limiter = :l AND subject = :s",
                {"delta": after.available - before.available, "anchor": iso(after.anchor), "n": after.periods,
                 "p": after.period, "next": iso(after.next_refill), "now": iso(now), "l": limiter.name,
                 "s": subject}))
        return after
