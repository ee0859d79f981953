"""The period grammar and exact period arithmetic (config/periods.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

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
