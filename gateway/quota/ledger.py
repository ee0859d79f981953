"""Balances kept in memory, for a quota database only this process writes (SQLite).

SQLite serves one gateway process, unless it is one of several workers sharing the
file, which use holds instead (docs/architecture.md, "Quotas"
and "Storage"; the conversations repository
caches on the same ground), so that process can decide admission on its own: each
balance is loaded once (created, and brought up to date, by `QuotaStore`), checked and
reserved in the event loop with no await between the check and the reservation (so
concurrent requests cannot both spend the same tokens), and every change is written to
the database as a relative update (`available = available ± n`), which commutes with
the charges still queued in the turn writer. Reservations live in the process: when it
stops they end with it, and nothing else can be holding them. This is what lets a turn
with quotas cost about what one without does (bench/quota.py); on PostgreSQL several
replicas share the balances, and admission goes to the database (`QuotaStore.reserve`).

The per-turn path works on `Balance` objects a reservation keeps (no lookup after
admission) and compares POSIX timestamps (`Balance.due`): a `datetime` is only made
when a top-up falls due.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, Sequence

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import BalanceState, Held, Pair, balance_key, brought_up_to_date, iso
from gateway.quota.store import QuotaStore
from gateway.storage.batch import Keyed

Key = tuple[str, str]   # (limiter name, subject)

# Balances kept, least recently used first out (~300 bytes each). One with a
# reservation is never dropped; one whose last charge is still queued in the turn writer
# (milliseconds) would have to be the least recently used of this many to be.
_CACHED = 20000


@dataclass(slots=True, eq=False)
class Balance:
    """One balance as this process holds it: its state (changed in place by charges),
    what live reservations hold of it, and when its next top-up falls due."""

    limiter: QuotaLimiterConfig
    subject: str
    state: BalanceState
    key: Key = ("", "")     # (limiter name, subject): its place in the ledger
    due: float = 0.0        # state.next_refill as a timestamp; -inf when its period changed
    reserved: int = 0
    stale: bool = False     # a write failed, or it was evicted: read it again before using it

    @classmethod
    def of(cls, limiter: QuotaLimiterConfig, subject: str, state: BalanceState) -> "Balance":
        balance = cls(limiter, subject, state, (limiter.name, subject))
        balance.adopt(state)
        return balance

    def adopt(self, state: BalanceState) -> None:
        self.state = state
        self.due = state.next_refill.timestamp() if state.period == self.limiter.period else float("-inf")
        self.stale = False


class Ledger:
    def __init__(self, store: QuotaStore):
        self._store = store
        self._balances: OrderedDict[Key, Balance] = OrderedDict()
        self._by_user: dict[str, tuple[Balance, ...]] = {}   # the last lookup of each user's pairs

    def lookup(self, user_id: str | None, pairs: Sequence[Pair]) -> tuple[Balance, ...] | None:
        """A user's balances (`pairs`, always the same for one user), as the most
        recently used, if all are in memory and fresh (else `load`). `user_id` None:
        any pairs (the quota API's), not remembered."""
        balances = self._balances
        found = self._by_user.get(user_id) if user_id is not None else None
        if found is not None:
            for cached in found:
                if cached.stale:
                    break
                balances.move_to_end(cached.key)
            else:
                return found
        listed = []
        for limiter, subject in pairs:
            balance = balances.get((limiter.name, subject))
            if balance is None or balance.stale:
                return None
            balances.move_to_end(balance.key)
            listed.append(balance)
        found = tuple(listed)
        if user_id is not None:
            if len(self._by_user) >= _CACHED:
                self._by_user.clear()
            self._by_user[user_id] = found
        return found

    async def load(self, user_id: str | None, pairs: Sequence[Pair], now: datetime) -> tuple[Balance, ...]:
        """A user's balances (`pairs`), reading (or creating) those not in memory or stale."""
        wanted = [pair for pair in pairs if (cached := self._balances.get((pair[0].name, pair[1]))) is None
                  or cached.stale]
        if wanted:
            for held in await self._store.bring_up_to_date(wanted, now):
                balance = self._balances.get((held.limiter.name, held.subject))
                if balance is None:   # (another turn may have loaded it meanwhile: keep that one)
                    self._balances[(held.limiter.name, held.subject)] = Balance.of(held.limiter, held.subject,
                                                                                  held.state)
                elif balance.stale:
                    balance.adopt(held.state)
        found = self.lookup(user_id, pairs)
        assert found is not None
        self._evict()
        return found

    def _evict(self) -> None:
        for key in list(self._balances)[:max(0, len(self._balances) - _CACHED)]:
            balance = self._balances[key]
            if not balance.reserved:
                balance.stale = True   # a user's cached lookup holding it reads it again
                del self._balances[key]

    def reserve(self, balances: Sequence[Balance], tokens: int, moment: float,
                clock: Callable[[], datetime]) -> tuple[Held | None, list[Keyed]]:
        """Reserve `tokens` on every balance, or on none: (the first without room, or
        None; the statements that persist top-ups applied on the way, at `clock()`).
        `moment` is now as a timestamp. No await."""
        statements: list[Keyed] = []
        for balance in balances:
            if moment >= balance.due:   # (a float compare: nearly always false)
                self._top_up(balance, clock(), statements)
            if balance.state.available - balance.reserved < tokens:
                return Held(balance.limiter, balance.subject, balance.state, balance.reserved), statements
        for balance in balances:
            balance.reserved += tokens
        return None, statements

    @staticmethod
    def settle(balances: Sequence[Balance], reserved: int, charge: int) -> None:
        """End a reservation of `reserved` tokens, charging `charge` (written by the caller)."""
        for balance in balances:
            balance.reserved -= reserved
            balance.state.available -= charge   # in place: the ledger's states are its own

    @staticmethod
    def available(balances: Sequence[Balance], moment: float, clock: Callable[[], datetime]) -> list[int] | None:
        """Each balance's available tokens at `moment` (a due top-up shown applied); None
        when one is stale (read it again first: `load`)."""
        values = []
        for balance in balances:
            if balance.stale:
                return None
            values.append(balance.state.available if moment < balance.due
                          else brought_up_to_date(balance.state, balance.limiter, clock()).available)
        return values

    @staticmethod
    def forget(balances: Sequence[Balance]) -> None:
        """A write failed: read these balances again before their next use (what
        reservations hold of them stays)."""
        for balance in balances:
            balance.stale = True

    def read(self, balances: Sequence[Balance], now: datetime) -> list[Held]:
        """The balances as of `now` (a due top-up shown applied), without changing them."""
        return [Held(balance.limiter, balance.subject,
                     replace(brought_up_to_date(balance.state, balance.limiter, now)), balance.reserved)
                for balance in balances]

    def delta(self, balance: Balance, now: datetime, value: int, add: bool, statements: list[Keyed]) -> int:
        """What an admin change adds to a balance, after any due top-up (persisted by
        `statements`); applied with `shift` once written."""
        self._top_up(balance, now, statements)
        return value if add else value - balance.state.available

    @staticmethod
    def shift(balance: Balance, delta: int) -> None:
        """Add `delta` to a balance (what a relative update wrote)."""
        balance.state.available += delta

    @staticmethod
    def _top_up(balance: Balance, now: datetime, statements: list[Keyed]) -> None:
        """Apply the periods elapsed by `now` (each once), with the statement that
        persists them."""
        before = balance.state
        after = brought_up_to_date(before, balance.limiter, now)
        if after is before or after == before:
            return
        balance.adopt(after)
        statements.append((
            balance_key((balance.limiter, balance.subject)),
            "UPDATE gateway_quota_balances SET available = available + :delta, anchor = :anchor, periods = :n, "
            "period = :p, next_refill = :next, updated_at = :now WHERE limiter = :l AND subject = :s",
            {"delta": after.available - before.available, "anchor": iso(after.anchor), "n": after.periods,
             "p": after.period, "next": iso(after.next_refill), "now": iso(now), "l": balance.limiter.name,
             "s": balance.subject}))
