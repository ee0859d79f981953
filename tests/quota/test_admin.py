"""What the quota API changes and reads, over a fake quota service: a change names only
configured limiters of the subject's kind with sound values, its idempotency key is
scoped to the subject, the admin and the values, every change is audited with users
hashed; the usage report's days. (Over real databases: tests/e2e/test_quota_api.py.)"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest

from gateway.config.quota import QuotaLimiterConfig
from gateway.quota.admin import QuotaAdmin
from gateway.quota.balances import BALANCE_MAX, BalanceState, Held
from gateway.quota.store import BalanceOutOfRange
from gateway.schema.errors import ApiError
from gateway import user_ids
from gateway.user_ids import LoggedUsers

NOW = datetime(2030, 3, 31, 12, tzinfo=timezone.utc)
DAILY = QuotaLimiterConfig(name="daily", type="user_limiter", initial_quota=100, quota_increase=10, period="1 day")
CLUSTER = QuotaLimiterConfig(name="cluster", type="cluster_limiter", initial_quota=1000, quota_increase=0,
                             period="1 day")


class Quota:
    enabled = True
    limiters = [DAILY, CLUSTER]

    def __init__(self) -> None:
        self.changes: list[tuple] = []
        self.asked: list[tuple] = []
        self.fail: str | None = None

    async def held(self, pairs):
        return [Held(limiter, subject, BalanceState(77, NOW, 0, limiter.period, NOW), 5) for limiter, subject in pairs]

    async def change(self, changes, *, add, idempotency):
        if self.fail:
            raise BalanceOutOfRange(self.fail, "ann")
        self.changes.append(([(pair[0].name, pair[1], value) for pair, value in changes], add, idempotency))
        return idempotency is None or idempotency[0] != "used"

    def now(self) -> datetime:
        return NOW

    async def usage(self, start, end, user_id):
        self.asked.append((start, end, user_id))
        return [{"user_id": "ann", "model": "m", "input_tokens": 3, "output_tokens": 4}]


@pytest.fixture
def admin() -> tuple[QuotaAdmin, Quota]:
    quota = Quota()
    return QuotaAdmin(quota), quota   # type: ignore[arg-type]


async def test_a_subjects_balances_under_its_kinds_limiters(admin):
    quotas, _ = admin
    body = await quotas.describe("cluster_limiter", "ignored", applied=True)
    assert body["subject"] == "" and body["available_quotas"] == {"cluster": 77} and body["applied"] is True
    [limiter] = (await quotas.describe("user_limiter", "ann"))["limiters"]
    assert (limiter["name"], limiter["subject"], limiter["available"], limiter["reserved"]) == ("daily", "ann", 77, 5)


async def test_a_change_is_scoped_and_audited(admin, caplog, monkeypatch):
    monkeypatch.setattr(user_ids, "_RULE", LoggedUsers(lambda user: f"h({user})", width=64))
    quotas, quota = admin
    with caplog.at_level(logging.INFO, logger="gateway.audit"):
        assert await quotas.change("user_limiter", "ann@example.com", {"daily": 50}, add=True, admin="root",
                                   idempotency_key="k1", request_id="req-9")
    [(changes, add, key)] = quota.changes
    assert changes == [("daily", "ann@example.com", 50)] and add is True
    assert key == ("k1", "user:ann@example.com", "root", "[('daily', 50)]")   # a key reused elsewhere is another change
    [line] = [record.getMessage() for record in caplog.records]
    assert "limiter=daily add=50 key='k1' applied=True request_id=req-9" in line
    assert "admin=h(root) subject=user:h(ann@example.com)" in line   # both users named as log lines name users


@pytest.mark.parametrize("kind, values, add, says", [
    ("user_limiter", {"cluster": 5}, False, "No user limiter is named 'cluster' (configured: daily)"),
    ("user_limiter", {"daily": -1}, False, "limiters.daily: a balance cannot be negative"),
    ("user_limiter", {"daily": 0}, True, "limiters.daily: an increment must be positive"),
    ("cluster_limiter", {"cluster": BALANCE_MAX + 1}, False, "limiters.cluster: the balance would exceed"),
    ("user_limiter", {}, False, "limiters: name at least one limiter"),
])
async def test_bad_changes_are_422_and_change_nothing(admin, kind, values, add, says):
    quotas, quota = admin
    with pytest.raises(ApiError) as refused:
        await quotas.change(kind, "ann", values, add=add, admin="root")
    assert refused.value.status == 422 and refused.value.cause.startswith(says)
    assert quota.changes == []


async def test_a_balance_out_of_range_in_the_transaction_is_422(admin):
    quotas, quota = admin
    quota.fail = "daily"
    with pytest.raises(ApiError) as refused:
        await quotas.change("user_limiter", "ann", {"daily": 5}, add=True, admin="root")
    assert refused.value.status == 422 and "would exceed" in refused.value.cause


async def test_the_usage_report_is_the_last_30_days_by_default(admin):
    quotas, quota = admin
    report = await quotas.usage(None, None, "ann")
    assert (report["start"], report["end"]) == ("2030-03-02", "2030-03-31") and quota.asked[-1][2] == "ann"
    assert report["usage"][0]["total_tokens"] == 7
    assert (await quotas.usage("2030-01-01", "2030-01-31", None))["start"] == "2030-01-01"
    for start, end, says in (("yesterday", None, "UTC days"), ("2030-02-01", "2030-01-01", "start is after end")):
        with pytest.raises(ApiError) as refused:
            await quotas.usage(start, end, None)
        assert refused.value.status == 422 and says in refused.value.cause
