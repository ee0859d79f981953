"""Exact replenishment of a balance, once per elapsed period (quota/balances.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import BALANCE_MAX, BalanceState, brought_up_to_date, seconds_until

UTC = timezone.utc


def limiter(**overrides) -> QuotaLimiterConfig:
    return QuotaLimiterConfig(**{"name": "daily", "type": "user_limiter", "initial_quota": 100,
                                 "quota_increase": 10, "period": "1 day", **overrides})


T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize("mode, available, days, expected", [
    ("increase", 40, 0, 40), ("increase", 40, 1, 50), ("increase", 40, 3, 70), ("increase", 95, 2, 115),
    ("reset", 40, 3, 100), ("reset", 140, 1, 100), ("cap", 40, 3, 70), ("cap", 95, 2, 100), ("cap", 140, 2, 140),
])
def test_each_elapsed_period_applies_once(mode, available, days, expected):
    rule = limiter(replenish=mode)
    state = BalanceState(available, T0, 0, "1 day", T0 + timedelta(days=1))
    after = brought_up_to_date(state, rule, T0 + timedelta(days=days, minutes=1))
    assert after.available == expected and after.periods == days
    assert after.next_refill == T0 + timedelta(days=days + 1)
    # Applying again at the same moment (a restart, another replica) changes nothing.
    assert brought_up_to_date(after, rule, T0 + timedelta(days=days, minutes=1)) == after


def test_top_ups_stop_at_a_signed_64_bit_integer():
    """A balance near the column's limit that tops up for years stays an integer the
    database can hold (SQLite would turn the column into REAL past it)."""
    rule = limiter(replenish="increase", quota_increase=2**62)
    state = BalanceState(BALANCE_MAX - 5, T0, 0, "1 day", T0 + timedelta(days=1))
    after = brought_up_to_date(state, rule, T0 + timedelta(days=400))
    assert after.available == BALANCE_MAX and after.periods == 400


def test_a_changed_period_keeps_the_stored_top_up_time():
    state = BalanceState(40, T0, 2, "1 day", T0 + timedelta(days=3))
    rule = limiter(period="1 week")
    before_boundary = brought_up_to_date(state, rule, T0 + timedelta(days=2, hours=23))
    assert before_boundary.available == 40 and before_boundary.next_refill == T0 + timedelta(days=3)
    after = brought_up_to_date(state, rule, T0 + timedelta(days=3))
    assert after.available == 50 and after.next_refill == T0 + timedelta(days=10)


def test_retry_after_rounds_up():
    assert seconds_until(T0 + timedelta(seconds=2.1), T0) == 3
    assert seconds_until(T0, T0) == 1
