"""Which processes share a SQLite file (storage/sharing.py): a worker (the supervisor's
`GATEWAY_WORKERS` or `GATEWAY_WORKER_ID`) opens it shared, a process alone claims it
for itself; the claims of two processes that disagree refuse the second with one
line naming the key, and a closed database gives its claim back."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from gateway.storage import sharing
from gateway.storage.database import DatabaseUnavailable
from gateway.storage.sqlite import SQLiteDatabase


def test_a_worker_is_told_so_by_its_environment():
    assert not sharing.several_processes({})
    assert not sharing.several_processes({"GATEWAY_WORKERS": "1"})
    assert not sharing.several_processes({"GATEWAY_WORKERS": "many"})
    assert sharing.several_processes({"GATEWAY_WORKERS": "2"})
    assert sharing.several_processes({"GATEWAY_WORKER_ID": "3"})


def _claim(path: str, shared: bool, answer) -> None:   # in another process
    try:
        os.close(sharing.claim(path, shared))
        answer.put("claimed")
    except DatabaseUnavailable as exc:
        answer.put(str(exc))


def _in_another_process(path: str, shared: bool) -> str:
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=_claim, args=(path, shared, answer))
    child.start()
    child.join(10)
    return answer.get(timeout=1)


def test_claims_of_processes_that_disagree_refuse_the_second(tmp_path):
    path = str(tmp_path / "g.db")
    alone = sharing.claim(path, shared=False)
    try:
        assert _in_another_process(path, False) == (f"database.sqlite_path {path} is in use by another gateway "
                                                    "process (several processes on one SQLite file: service.workers)")
        assert _in_another_process(path, True) == (f"database.sqlite_path {path} is in use by a gateway process "
                                                   "that is not one of its workers")
    finally:
        os.close(alone)
    worker = sharing.claim(path, shared=True)
    try:
        assert _in_another_process(path, True) == "claimed"   # workers share it
        assert _in_another_process(path, False).startswith(f"database.sqlite_path {path} is in use")
    finally:
        os.close(worker)
    assert _in_another_process(path, False) == "claimed"      # given back


async def test_a_serving_database_is_claimed_and_shared_by_workers(tmp_path, monkeypatch):
    monkeypatch.delenv("GATEWAY_WORKER_ID", raising=False)
    monkeypatch.setenv("GATEWAY_WORKERS", "2")
    path = str(tmp_path / "g.db")
    db = await SQLiteDatabase.open(path, claim=True)
    assert db.shared and db.dialect == "sqlite"
    assert _in_another_process(path, True) == "claimed"
    await db.close()
    monkeypatch.delenv("GATEWAY_WORKERS")
    db = await SQLiteDatabase.open(path, claim=True)
    try:
        assert not db.shared
        assert "is in use by another gateway process" in _in_another_process(path, False)
    finally:
        await db.close()
    assert not (await _unclaimed(path)).shared   # tests and tools open it without a claim


async def _unclaimed(path: str) -> SQLiteDatabase:
    db = await SQLiteDatabase.open(path)
    await db.close()
    return db


@pytest.mark.parametrize("shared", [False, True])
def test_one_process_never_conflicts_with_itself(tmp_path, shared):
    path = str(tmp_path / "g.db")
    first, second = sharing.claim(path, shared), sharing.claim(path, not shared)   # POSIX locks are the process's
    os.close(first)
    os.close(second)
