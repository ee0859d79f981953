"""Replenishment periods: LCORE's interval text, and exact period arithmetic (pure).

LCORE passes `period` to PostgreSQL as an `INTERVAL`; the gateway accepts the part of
that grammar a quota needs: one positive whole number and one unit, `30 seconds`,
`1 day`, `2 weeks`, `1 month` (units: second, minute, hour, day, week, month, year,
singular or plural, any case). A month is a calendar month and a year twelve of them:
the k-th period of a subject starts k months after its first one, on the same day of
the month (the month's last day when it has no such day: 31 January, 28 February,
31 March…), always counted from the first period start, so the day never drifts.

A subject's period boundaries are `anchor + k × period` for k = 1, 2, …; `elapsed()`
counts how many of them have passed, which is how many replenishments are due.

It lives in `config/` because the configuration validates `period` with it and imports
nothing of the gateway outside `config/`; `quota/` uses it through a limiter's
`parsed_period`.
"""

from __future__ import annotations

import calendar
from functools import lru_cache
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_MONTHS = {"month": 1, "year": 12}
_GRAMMAR = re.compile(r"^\s*(\d+)\s*([a-z]+?)s?\s*$")


class PeriodError(ValueError):
    pass


@dataclass(frozen=True)
class Period:
    text: str
    seconds: int = 0   # a fixed length, or
    months: int = 0    # a number of calendar months

    @classmethod
    def parse(cls, text: str) -> "Period":
        # A class object is hashable; mypy does not match it to typeshed's Hashable protocol.
        return _parse(cls, text)  # type: ignore[arg-type]

    @classmethod
    def _parse(cls, text: str) -> "Period":
        match = _GRAMMAR.match(text.lower()) if isinstance(text, str) else None
        unit = match.group(2) if match else ""
        if match is None or (unit not in _UNITS and unit not in _MONTHS):
            raise PeriodError(f"{text!r} is not a period: write a whole number and one unit "
                              "(second, minute, hour, day, week, month or year), e.g. '1 day' or '2 weeks'")
        count = int(match.group(1))
        if count <= 0:
            raise PeriodError(f"{text!r}: a period must be longer than zero")
        if unit in _MONTHS:
            return cls(text, months=count * _MONTHS[unit])
        return cls(text, seconds=count * _UNITS[unit])

    def boundary(self, anchor: datetime, k: int) -> datetime:
        """The start of the k-th period after `anchor` (k may be negative)."""
        if self.seconds:
            return anchor + timedelta(seconds=self.seconds * k)
        return add_months(anchor, self.months * k)

    def elapsed(self, anchor: datetime, now: datetime) -> int:
        """How many period boundaries after `anchor` are at or before `now`."""
        if now < anchor:
            return 0
        if self.seconds:
            return int((now - anchor).total_seconds() // self.seconds)
        months = (now.year - anchor.year) * 12 + now.month - anchor.month
        k = months // self.months
        # The estimate from the calendar fields can be one too many (earlier in the month).
        while k > 0 and self.boundary(anchor, k) > now:
            k -= 1
        return k


@lru_cache(maxsize=256)
def _parse(cls: type[Period], text: str) -> Period:
    return cls._parse(text)


def add_months(moment: datetime, months: int) -> datetime:
    """`moment` moved by whole calendar months, the day clamped to the month's length."""
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return moment.replace(year=year, month=month + 1, day=day)
