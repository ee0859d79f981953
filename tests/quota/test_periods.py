"""The period grammar and exact period arithmetic (config/periods.py, quota/balances.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import BalanceState, brought_up_to_date, seconds_until
from gateway.config.periods import Period, PeriodError, add_months

UTC = timezone.utc


@pytest.mark.parametrize("text, seconds, months", [
    ("30 seconds", 30, 0), ("1 second", 1, 0), ("5 minutes", 300, 0), ("2 hours", 7200, 0), ("1 day", 86400, 0),
    ("2 weeks", 14 * 86400, 0), ("1 month", 0, 1), ("3 Months", 0, 3), ("1 year", 0, 12), (" 7days ", 7 * 86400, 0),
])
def test_accepted_periods(text, seconds, months):
    period = Period.parse(text)
    assert (period.seconds, period.months) == (seconds, months)


@pytest.mark.parametrize("text", ["", "day", "0 days", "1 fortnight", "1 day 2 hours", "-1 day", "1.5 days"])
def test_refused_periods(text):
    with pytest.raises(PeriodError):
        Period.parse(text)


def test_months_are_calendar_months_counted_from_the_anchor():
    anchor = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    month = Period.parse("1 month")
    assert [month.boundary(anchor, k).date().isoformat() for k in range(1, 5)] == \
        ["2026-02-28", "2026-03-31", "2026-04-30", "2026-05-31"]   # no drift to the 28th
    assert month.elapsed(anchor, datetime(2026, 2, 28, 11, 59, tzinfo=UTC)) == 0
    assert month.elapsed(anchor, datetime(2026, 2, 28, 12, 0, tzinfo=UTC)) == 1
    assert month.elapsed(anchor, datetime(2026, 5, 30, tzinfo=UTC)) == 3
    assert add_months(datetime(2024, 3, 31, tzinfo=UTC), -1) == datetime(2024, 2, 29, tzinfo=UTC)


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
