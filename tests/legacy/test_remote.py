"""Interrupts across replicas, over a fake LISTEN/NOTIFY bus between two replicas: the
one running the stream answers `interrupted`, `finished` or `forbidden`; nobody answering
is None once the wait is over; a replica ignores its own question and any malformed
message; without LISTEN (SQLite) interrupts stay in-process. (On PostgreSQL through
`gateway serve`: tests/e2e/test_interrupt.py.)"""

from __future__ import annotations

import asyncio
from typing import Callable

import pytest

from gateway.legacy import remote
from gateway.legacy.remote import ANSWER, ASK, RemoteInterrupts


class Bus:
    """One PostgreSQL's channels: every listener of a channel gets each notification."""

    def __init__(self) -> None:
        self.listeners: dict[str, list[Callable[[str], None]]] = {}


class Db:
    def __init__(self, bus: Bus):
        self.bus = bus
        self.sent: list[tuple[str, str]] = []

    async def listen(self, channel: str, callback: Callable[[str], None]):
        self.bus.listeners.setdefault(channel, []).append(callback)

        async def stop() -> None:
            self.bus.listeners[channel].remove(callback)
        return stop

    async def notify(self, channel: str, payload: str) -> None:
        self.sent.append((channel, payload))
        for callback in list(self.bus.listeners.get(channel, ())):
            callback(payload)


class Registry:
    """This replica's streams: request id -> (owner, still running)."""

    def __init__(self, streams: dict[str, tuple[str, bool]]):
        self.streams = streams
        self.interrupted: list[str] = []

    def owner(self, request_id: str) -> str | None:
        found = self.streams.get(request_id)
        return found[0] if found else None

    def interrupt(self, request_id: str, user_id: str) -> bool:
        self.interrupted.append(request_id)
        return self.streams[request_id][1]


@pytest.fixture
async def replicas():
    bus = Bus()
    asking = RemoteInterrupts(Db(bus), Registry({}))   # type: ignore[arg-type]
    running = RemoteInterrupts(Db(bus), registry := Registry({"req-1": ("ann", True), "req-2": ("ann", False)}))
    await asking.start()
    await running.start()
    yield asking, registry, bus
    await asking.close()
    await running.close()


async def test_the_replica_running_the_stream_answers(replicas):
    asking, registry, _ = replicas
    assert asking.enabled
    assert await asking.ask("req-1", "ann") == "interrupted" and registry.interrupted == ["req-1"]
    assert await asking.ask("req-2", "ann") == "finished"
    assert await asking.ask("req-1", "mallory") == "forbidden"
    assert registry.interrupted == ["req-1", "req-2"]   # another user's request interrupts nothing


async def test_nobody_answering_is_none(replicas, monkeypatch):
    monkeypatch.setattr(remote, "ANSWER_TIMEOUT", 0.05)
    asking, _, _ = replicas
    assert await asking.ask("req-unknown", "ann") is None
    assert asking._waiting == {}


async def test_own_questions_and_malformed_messages_are_ignored(replicas):
    asking, registry, bus = replicas
    asking._registry = Registry({"req-1": ("ann", True)})   # it would answer, were it not its own question
    assert await asking.ask("req-1", "ann") == "interrupted"
    assert asking._registry.interrupted == []   # type: ignore[attr-defined]
    for payload in ("not json", "{}", '{"id": "req-1"}', "[1]"):
        for callback in bus.listeners[ASK] + bus.listeners[ANSWER]:
            callback(payload)
    await asyncio.sleep(0)
    assert registry.interrupted == ["req-1"]


async def test_closing_stops_listening_and_sqlite_has_no_bus():
    bus = Bus()
    replica = RemoteInterrupts(Db(bus), Registry({}))   # type: ignore[arg-type]
    await replica.start()
    await replica.close()
    assert not replica.enabled and bus.listeners == {ASK: [], ANSWER: []}
    in_process = RemoteInterrupts(object(), Registry({}))   # type: ignore[arg-type]
    await in_process.start()
    assert not in_process.enabled


class RunningRegistry(Registry):
    def running(self) -> int:
        return sum(1 for _, running in self.streams.values() if running)


async def test_workers_on_one_sqlite_file_ask_through_a_polled_table(tmp_path, monkeypatch):
    """Two workers' databases on one file (each its own connection, as two processes):
    the one running the stream answers in the question's row; an idle one reads nothing;
    a question nobody answers is None after the polled wait; rows are deleted."""
    from gateway.storage.sqlite import SQLiteDatabase

    monkeypatch.setattr(remote, "POLLED_TIMEOUT", 0.5)
    monkeypatch.setenv("GATEWAY_WORKERS", "2")
    path = str(tmp_path / "g.db")
    asking_db, running_db = await SQLiteDatabase.open(path, claim=True), await SQLiteDatabase.open(path, claim=True)
    asking = RemoteInterrupts(asking_db, RunningRegistry({}))   # type: ignore[arg-type]
    registry = RunningRegistry({"req-1": ("ann", True), "req-2": ("ann", False)})
    running = RemoteInterrupts(running_db, registry)   # type: ignore[arg-type]
    try:
        await asking.start()
        await running.start()
        assert asking.enabled and running.enabled
        assert await asking.ask("req-1", "ann") == "interrupted" and registry.interrupted == ["req-1"]
        assert await asking.ask("req-2", "ann") == "finished"
        assert await asking.ask("req-1", "bob") == "forbidden"
        assert await asking.ask("req-9", "ann") is None   # nobody has it
        assert await asking_db.fetchall("SELECT ask FROM gateway_stream_interrupts") == []
    finally:
        await asking.close()
        await running.close()
        await asking_db.close()
        await running_db.close()


async def test_a_process_alone_on_sqlite_polls_nothing(tmp_path, monkeypatch):
    from gateway.storage.sqlite import SQLiteDatabase

    monkeypatch.delenv("GATEWAY_WORKERS", raising=False)
    monkeypatch.delenv("GATEWAY_WORKER_ID", raising=False)
    db = await SQLiteDatabase.open(str(tmp_path / "g.db"), claim=True)
    alone = RemoteInterrupts(db, RunningRegistry({}))   # type: ignore[arg-type]
    await alone.start()
    try:
        assert not alone.enabled and alone._poller is None
    finally:
        await alone.close()
        await db.close()
