"""The SQLite strategy's balances in memory: a reservation on every balance or on none,
checked with no await; charges settle in place; a due top-up applied once and persisted
as a relative update; a stale balance read again. (Over a real database, concurrency
included: test_service.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import BalanceState, Held
from gateway.quota.ledger import Balance, Ledger

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)
DAILY = QuotaLimiterConfig(name="daily", type="user_limiter", initial_quota=100, quota_increase=10, period="1 day")
CLUSTER = QuotaLimiterConfig(name="cluster", type="cluster_limiter", initial_quota=1000, quota_increase=0,
                             period="1 day")
PAIRS = [(CLUSTER, ""), (DAILY, "ann")]


class Store:
    """The one call the ledger makes of `QuotaStore`: new balances, as it would create them."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    async def bring_up_to_date(self, pairs, now):
        self.asked.append([f"{limiter.name}/{subject}" for limiter, subject in pairs])
        return [Held(limiter, subject, BalanceState.new(limiter, now), 0) for limiter, subject in pairs]


async def loaded(store: Store | None = None) -> tuple[Ledger, tuple[Balance, ...]]:
    ledger = Ledger(store or Store())   # type: ignore[arg-type]
    return ledger, await ledger.load("ann", PAIRS, NOW)


async def test_balances_are_read_once_then_found_in_memory():
    store = Store()
    ledger, balances = await loaded(store)
    assert [b.state.available for b in balances] == [1000, 100]
    assert ledger.lookup("ann", PAIRS) == balances
    assert await ledger.load("ann", PAIRS, NOW) == balances and store.asked == [["cluster/", "daily/ann"]]
    assert ledger.lookup("bo", [(DAILY, "bo")]) is None   # not loaded yet


async def test_a_reservation_is_on_every_balance_or_on_none():
    ledger, balances = await loaded()
    moment = NOW.timestamp()
    assert ledger.reserve(balances, 60, moment, lambda: NOW) == (None, [])
    assert [b.reserved for b in balances] == [60, 60]
    refused, _ = ledger.reserve(balances, 50, moment, lambda: NOW)
    # The daily balance has 40 left: it refuses, and the cluster's is not touched.
    assert refused is not None and refused.limiter is DAILY and refused.room == 40
    assert [b.reserved for b in balances] == [60, 60]


async def test_settling_charges_what_was_used_and_frees_the_rest():
    ledger, balances = await loaded()
    ledger.reserve(balances, 60, NOW.timestamp(), lambda: NOW)
    Ledger.settle(balances, 60, 25)
    assert [(b.reserved, b.state.available) for b in balances] == [(0, 975), (0, 75)]
    assert Ledger.available(balances, NOW.timestamp(), lambda: NOW) == [975, 75]


async def test_a_due_top_up_is_applied_once_and_persisted_relatively():
    ledger, balances = await loaded()
    Ledger.settle(balances, 0, 50)                  # ann has 50 of 100 left
    later = NOW + timedelta(days=2, hours=1)        # two daily boundaries passed
    assert Ledger.available(balances, later.timestamp(), lambda: later) == [950, 70]   # shown, not applied
    assert balances[1].state.available == 50
    refused, statements = ledger.reserve(balances, 10, later.timestamp(), lambda: later)
    assert refused is None and balances[1].state.available == 70 and balances[1].state.periods == 2
    # Each balance's periods moved on (the cluster's quota_increase is 0: +0), each persisted.
    assert [(params["l"], params["delta"], params["n"]) for _, _, params in statements] == [
        ("cluster", 0, 2), ("daily", 20, 2)]
    assert "available = available + :delta" in statements[0][1]
    assert ledger.reserve(balances, 10, later.timestamp(), lambda: later)[1] == []   # not applied twice


async def test_a_forgotten_balance_is_read_again_and_keeps_its_reservations():
    store = Store()
    ledger, balances = await loaded(store)
    ledger.reserve(balances, 30, NOW.timestamp(), lambda: NOW)
    Ledger.forget(balances)   # a write failed
    assert ledger.lookup("ann", PAIRS) is None
    assert Ledger.available(balances, NOW.timestamp(), lambda: NOW) is None
    again = await ledger.load("ann", PAIRS, NOW)
    assert again == balances and len(store.asked) == 2
    assert [b.reserved for b in again] == [30, 30] and not any(b.stale for b in again)


async def test_an_admin_change_is_a_delta():
    ledger, balances = await loaded()
    statements: list = []
    assert ledger.delta(balances[1], NOW, 500, False, statements) == 400   # set to 500
    assert ledger.delta(balances[1], NOW, 7, True, statements) == 7        # add 7
    Ledger.shift(balances[1], 400)
    assert balances[1].state.available == 500 and statements == []
