"""What the quota API reads and changes: the balances of one subject (a user, or the
cluster), setting and adding tokens per limiter (each change brings the balance up to
date first, then applies, in one transaction; an increment's client key makes a retry
change nothing), every change audited in the log (`gateway.audit`), and the usage
report from the token history."""

from __future__ import annotations

import logging
from datetime import date, timedelta
from typing import Literal, NotRequired, TypedDict

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.balances import BALANCE_MAX, CLUSTER, iso
from gateway.quota.service import QuotaService
from gateway.quota.store import BalanceOutOfRange, UsageSum
from gateway.schema.errors import ApiError, invalid_attribute
from gateway.user_ids import logged_user

audit = logging.getLogger("gateway.audit")

Kind = Literal["user_limiter", "cluster_limiter"]


class LimiterBalance(TypedDict):
    """One limiter's entry of `QuotasResponse` (`limiters`)."""
    name: str
    type: str
    subject: str
    available: int
    reserved: int
    initial_quota: int
    quota_increase: int
    period: str
    replenish: str
    next_replenishment: str


class Quotas(TypedDict):
    """LCORE's `QuotasResponse`: a subject's balances under the limiters of one kind
    (`applied`: whether a change was applied, on a change's answer)."""
    enforced: bool
    subject: str
    available_quotas: dict[str, int]
    limiters: list[LimiterBalance]
    applied: NotRequired[bool]


class UsageTotal(UsageSum):
    """A usage row with its total."""
    total_tokens: int


class UsageReport(TypedDict):
    """`GET /v1/quotas/usage`'s body: the days asked for and the rows."""
    start: str
    end: str
    usage: list[UsageTotal]


class QuotaAdmin:
    def __init__(self, quota: QuotaService):
        self._quota = quota

    def _limiters(self, kind: Kind) -> list[QuotaLimiterConfig]:
        return [limiter for limiter in self._quota.limiters if limiter.type == kind]

    async def describe(self, kind: Kind, subject: str, applied: bool | None = None) -> Quotas:
        """The subject's balances under every limiter of its kind (`QuotasResponse`)."""
        subject = subject if kind == "user_limiter" else CLUSTER
        pairs = [(limiter, subject) for limiter in self._limiters(kind)]
        held = await self._quota.held(pairs) if pairs else []
        limiters: list[LimiterBalance] = [{"name": h.limiter.name, "type": h.limiter.type, "subject": subject,
                     "available": h.state.available, "reserved": h.reserved,
                     "initial_quota": h.limiter.initial_quota, "quota_increase": h.limiter.quota_increase,
                     "period": h.limiter.period, "replenish": h.limiter.replenish,
                     "next_replenishment": iso(h.state.next_refill)} for h in held]
        body: Quotas = {"enforced": self._quota.enabled, "subject": subject,
                                "available_quotas": {entry["name"]: entry["available"] for entry in limiters},
                                "limiters": limiters}
        if applied is not None:
            body["applied"] = applied
        return body

    async def change(self, kind: Kind, subject: str, values: dict[str, int], *, add: bool, admin: str,
                     idempotency_key: str | None = None, request_id: str | None = None) -> bool:
        """Set (or add to) the subject's balances; False when the key was used before."""
        subject = subject if kind == "user_limiter" else CLUSTER
        by_name = {limiter.name: limiter for limiter in self._limiters(kind)}
        for name, value in values.items():
            if name not in by_name:
                known = ", ".join(sorted(by_name)) or "none"
                raise invalid_attribute(f"No {kind.replace('_', ' ')} is named {name!r} (configured: {known})",
                                        param="limiters", code="unknown_limiter")
            if value < 0 or (add and value == 0):
                raise invalid_attribute(f"limiters.{name}: {'an increment must be positive' if add else 'a balance cannot be negative'}",
                                        param="limiters")
            if value > BALANCE_MAX:
                raise _out_of_range(name)
        if not values:
            raise invalid_attribute("limiters: name at least one limiter", param="limiters")
        scope = f"{'user:' + subject if kind == 'user_limiter' else 'cluster'}"
        key = (idempotency_key, scope, admin, repr(sorted(values.items()))) if idempotency_key else None
        try:
            applied = await self._quota.change([((by_name[name], subject), value) for name, value in values.items()],
                                               add=add, idempotency=key)
        except BalanceOutOfRange as exc:   # checked in the change's transaction, which rolled back
            raise _out_of_range(exc.limiter) from None
        # Both users named as log lines name users (`user_ids.py`): hashed unless raw is asked for.
        shown = f"user:{logged_user(subject)}" if kind == "user_limiter" else scope
        for name, value in values.items():
            audit.info("quota change admin=%s subject=%s limiter=%s %s=%d key=%r applied=%s request_id=%s",
                       logged_user(admin), shown, name, "add" if add else "set", value, idempotency_key, applied,
                       request_id)
        return applied

    async def usage(self, start: str | None, end: str | None, user_id: str | None) -> UsageReport:
        """The token history summed per user and model over UTC days (default: the last 30)."""
        try:
            last = date.fromisoformat(end) if end else self._quota.now().date() if self._quota.enabled \
                else date.today()
            first = date.fromisoformat(start) if start else last - timedelta(days=29)
        except ValueError:
            raise invalid_attribute("start and end are UTC days: YYYY-MM-DD", param="start") from None
        if first > last:
            raise invalid_attribute("start is after end", param="start")
        rows = await self._quota.usage(first.isoformat(), last.isoformat(), user_id)
        return {"start": first.isoformat(), "end": last.isoformat(),
                "usage": [{**row, "total_tokens": row["input_tokens"] + row["output_tokens"]} for row in rows]}


def _out_of_range(name: str) -> ApiError:
    return invalid_attribute(f"limiters.{name}: the balance would exceed {BALANCE_MAX} (a signed 64-bit integer)",
                             param="limiters")
