"""Replenishment of one balance, exactly once per elapsed period (pure).

A balance row keeps `anchor` (when the subject's first period started: the moment its
row was created, from the database clock), `periods` (how many boundaries have been
applied) and `next_refill` (`anchor + (periods + 1) × period`, so the admission fast
path can tell in SQL whether a top-up is due). Bringing a balance up to date applies
every boundary between `periods` and now, each once, as if the scheduler had never
stopped: `increase` adds `quota_increase` per period (no cap, LCORE on PostgreSQL),
`cap` adds it but not past `initial_quota` (a balance already above stays), `reset`
sets `initial_quota` (once, however many periods passed).

A limiter whose `period` changed in the configuration keeps the top-up time already
stored: the current period ends then, and periods of the new length follow from it.

Also what names a balance (`Pair`, its place in the lock order `balance_key`) and what a
reader sees of one (`Held`), which the store, the ledger and the holds share.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from gateway.config.quota import QuotaLimiterConfig

Pair = tuple[QuotaLimiterConfig, str]   # a limiter and one subject of it ('' = the cluster)
CLUSTER = ""   # the cluster limiter's one subject, as in LCORE


def balance_key(pair: Pair) -> str:
    """A balance row's place in the one lock order every transaction follows (pairs are
    kept sorted by it: `LimitedQuota.pairs`), so concurrent ones cannot deadlock."""
    return f"balance\0{pair[0].name}\0{pair[1]}"

# speed: the last moment's text is kept: the turns of a batch share one `now()`, and a
# repeated moment costs ~1.3k instructions against `isoformat()`'s ~15.4k (a new one the
# same as plain; bench/README.md "The hot path's tricks"). Plain version:
# `moment.astimezone(timezone.utc).isoformat(timespec="microseconds")`.
_last_iso: tuple[datetime | None, str] = (None, "")


def iso(moment: datetime) -> str:
    """The one text form of stored quota times: UTC, microseconds (sorts as time). The
    last one is kept: the turns of a millisecond share one `now()`."""
    global _last_iso
    if moment is not _last_iso[0]:
        _last_iso = (moment, moment.astimezone(timezone.utc).isoformat(timespec="microseconds"))
    return _last_iso[1]


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass(slots=True)
class BalanceState:   # not frozen: the SQLite ledger adds charges to its own in place (ledger.shift)
    available: int
    anchor: datetime
    periods: int
    period: str          # the period text the counting was made with
    next_refill: datetime

    @classmethod
    def new(cls, limiter: QuotaLimiterConfig, now: datetime) -> "BalanceState":
        return cls(limiter.initial_quota, now, 0, limiter.period, limiter.parsed_period.boundary(now, 1))


# What a balance column holds on both engines (SQLite's INTEGER, PostgreSQL's BIGINT).
BALANCE_MAX = 2**63 - 1
BALANCE_MIN = -(2**63)


def brought_up_to_date(state: BalanceState, limiter: QuotaLimiterConfig, now: datetime) -> BalanceState:
    """The balance with every period boundary up to `now` applied once."""
    if now < state.next_refill and state.period == limiter.period:
        return state  # nothing due (nearly always): no calendar arithmetic
    period = limiter.parsed_period
    anchor, periods = state.anchor, state.periods
    if state.period != limiter.period:
        anchor, periods = period.boundary(state.next_refill, -1), 0
    due = period.elapsed(anchor, now) - periods
    available = state.available
    if due > 0:
        if limiter.replenish == "increase":
            # However long a balance went unused, it stays a signed 64-bit integer.
            available = min(BALANCE_MAX, available + due * limiter.quota_increase)
        elif limiter.replenish == "reset":
            available = limiter.initial_quota
        elif available < limiter.initial_quota:
            available = min(limiter.initial_quota, available + due * limiter.quota_increase)
        periods += due
    return BalanceState(available, anchor, periods, limiter.period, period.boundary(anchor, periods + 1))


def seconds_until(moment: datetime, now: datetime) -> int:
    """Whole seconds from `now` to `moment`, at least 1 (a Retry-After value)."""
    return max(1, int(-(-(moment - now).total_seconds() // 1)))


@dataclass(frozen=True)
class Held:
    """A balance as a reader sees it: up to date, and what live reservations hold."""

    limiter: QuotaLimiterConfig
    subject: str
    state: BalanceState
    reserved: int

    @property
    def room(self) -> int:
        return self.state.available - self.reserved
