"""The expiry sweep over fakes of the database clock, the history and the forgetting:
the cutoff is the database's now minus the TTL, candidates are read in batches until a
short one, and only the deletions this replica claimed count. (Over real databases and
`gateway serve`: tests/e2e/test_conversation_expiry.py.)"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from gateway.config.user_data import ConversationExpiryConfig
from gateway.conversations import expiry
from gateway.conversations.expiry import ExpirySweep

NOW = datetime(2030, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))   # a database answering in +02:00


class Db:
    async def now(self) -> datetime:
        return NOW


class History:
    def __init__(self, idle: list[str]):
        self.left = list(idle)
        self.asked: list[tuple[str, int]] = []

    async def idle(self, before: str, limit: int) -> list[str]:
        self.asked.append((before, limit))
        return self.left[:limit]


class Forgetting:
    """Claims every conversation except those another replica took first."""

    def __init__(self, history: History, taken: set[str]):
        self.history, self.taken = history, taken
        self.claimed: list[tuple[str, str | None]] = []

    async def delete(self, conversation_id: str, idle_before: str | None = None) -> object | None:
        self.history.left.remove(conversation_id)
        if conversation_id in self.taken:
            return None
        self.claimed.append((conversation_id, idle_before))
        return object()


def sweep(idle: list[str], taken: set[str] = set(), ttl: int | None = 3600):
    history = History(idle)
    forgetting = Forgetting(history, taken)
    config = ConversationExpiryConfig(idle_ttl_seconds=ttl, sweep_interval_seconds=0.01)
    return ExpirySweep(config, Db(), history, forgetting), history, forgetting   # type: ignore[arg-type]


async def test_the_cutoff_is_the_databases_now_minus_the_ttl_in_utc():
    runner, history, forgetting = sweep(["c1", "c2"], taken={"c2"})
    assert await runner.sweep() == 1   # c2 was claimed by another replica
    assert history.asked == [("2030-01-01T09:00:00+00:00", expiry._BATCH)]
    assert forgetting.claimed == [("c1", "2030-01-01T09:00:00+00:00")]   # re-checked idle at the claim


async def test_candidates_are_read_again_until_a_short_batch(monkeypatch):
    monkeypatch.setattr(expiry, "_BATCH", 2)
    runner, history, forgetting = sweep([f"c{n}" for n in range(5)])
    assert await runner.sweep() == 5
    assert len(history.asked) == 3 and history.left == []   # 2 + 2 + 1


async def test_the_task_sweeps_every_interval_and_survives_a_failure(caplog):
    runner, history, forgetting = sweep(["c1"])
    failures = iter([RuntimeError("database hiccup")])

    real = history.idle

    async def flaky(before: str, limit: int) -> list[str]:
        for failure in failures:
            raise failure
        return await real(before, limit)

    history.idle = flaky   # type: ignore[method-assign]
    runner.start()
    for _ in range(200):
        if forgetting.claimed:
            break
        await asyncio.sleep(0.01)
    await runner.close()
    assert [claimed for claimed, _ in forgetting.claimed] == ["c1"]
    assert "conversation expiry sweep failed" in caplog.text


async def test_without_a_ttl_nothing_runs():
    runner, history, _ = sweep(["c1"], ttl=None)
    runner.start()
    await asyncio.sleep(0.05)
    await runner.close()
    assert history.asked == []
