"""Metrics read from the gateway's state when scraped: the upstream capability mode (the
configured API, or what the probe found) and the database pool's use; and the database's
statements timed by wrapping the instance's methods. (Scraped through `gateway serve`:
tests/e2e/test_metrics.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gateway.observability.metrics import Metrics
from gateway.observability.state import StateCollector, time_database


def scraped(api: str, has_responses: bool | None, conversations_upstream: bool | None,
            pool: tuple[int, int, int] | None) -> dict[str, list[tuple[dict, float]]]:
    capabilities = SimpleNamespace(has_responses=has_responses, conversations_upstream=conversations_upstream)
    db = SimpleNamespace(pool_use=lambda: pool)
    return {family.name: [(sample.labels, sample.value) for sample in family.samples]
            for family in StateCollector(capabilities, api, db).collect()}   # type: ignore[arg-type]


@pytest.mark.parametrize("api, has_responses, conversations, labels", [
    ("auto", None, None, {"api": "unknown", "conversations": "unknown"}),   # not probed yet
    ("auto", True, True, {"api": "responses", "conversations": "upstream"}),
    ("auto", False, False, {"api": "chat_completions", "conversations": "gateway"}),
    ("responses", False, True, {"api": "responses", "conversations": "upstream"}),   # the configured API wins
])
def test_the_capability_mode_is_one_series(api, has_responses, conversations, labels):
    assert scraped(api, has_responses, conversations, None)["gateway_upstream_capability_mode"] == [(labels, 1)]


def test_the_upstream_connections_and_the_tasks_alive():
    capabilities = SimpleNamespace(has_responses=True, conversations_upstream=True)
    db = SimpleNamespace(pool_use=lambda: None)
    families = {family.name: family for family in StateCollector(  # type: ignore[arg-type]
        capabilities, "auto", db, None, lambda: (1, 4)).collect()}
    assert [(s.labels, s.value) for s in families["gateway_upstream_connections"].samples] == [
        ({"state": "busy"}, 1), ({"state": "idle"}, 4)]
    assert families["gateway_asyncio_tasks"].samples == []   # no loop running here


async def test_the_tasks_alive_are_counted_in_the_loop():
    capabilities = SimpleNamespace(has_responses=True, conversations_upstream=True)
    db = SimpleNamespace(pool_use=lambda: None)
    families = {family.name: family for family in StateCollector(  # type: ignore[arg-type]
        capabilities, "auto", db).collect()}
    assert families["gateway_asyncio_tasks"].samples[0].value >= 1   # this test's own task
    assert families["gateway_upstream_connections"].samples == []    # no pool


def test_the_pool_only_where_there_is_one():
    assert scraped("auto", True, True, None)["gateway_db_pool_connections"] == []   # SQLite
    assert scraped("auto", True, True, (2, 3, 10))["gateway_db_pool_connections"] == [
        ({"state": "in_use"}, 2), ({"state": "idle"}, 3), ({"state": "max"}, 10)]


async def test_the_databases_statements_are_timed_by_operation():
    class Db:
        async def write(self, statements):
            return len(statements)

        async def execute(self, sql, params=None):
            return 1

        async def fetchall(self, sql, params=None):
            return [{"n": 1}]

    metrics, db = Metrics(), Db()
    time_database(db, metrics)   # type: ignore[arg-type]
    assert await db.write([("a", {}), ("b", {})]) == 2 and await db.fetchall("SELECT 1") == [{"n": 1}]
    await db.execute("UPDATE")
    histogram = metrics.metric("gateway_db_operation_duration_seconds")
    pending = {operation: len(histogram.labels(operation).pending) for operation in ("write", "execute", "read")}
    assert pending == {"write": 1, "execute": 1, "read": 1}
    # Wrapped on this instance only: neither backend's class knows.
    assert hasattr(db.write, "__wrapped__") and not hasattr(Db().write, "__wrapped__")


def test_every_engine_providers_circuit_is_a_series_of_its_own():
    from gateway.upstream.breaker import CircuitBreaker

    capabilities = SimpleNamespace(has_responses=True, conversations_upstream=True)
    db = SimpleNamespace(pool_use=lambda: None)
    upstream = CircuitBreaker("http://llama:8321", 2, 10)
    search = CircuitBreaker("https://user:pw@search.example/v1/search", 2, 10)
    store, same_store = CircuitBreaker("http://store:9000", 2, 10), CircuitBreaker("http://store:9000", 2, 10)
    for breaker in (search, same_store):
        breaker.failed("refused")
        breaker.failed("refused")
    families = {family.name: family for family in StateCollector(  # type: ignore[arg-type]
        capabilities, "auto", db, upstream, None, [search, store, same_store]).collect()}
    assert [(s.labels, s.value) for s in families["gateway_upstream_circuit_state"].samples] == [
        ({"upstream": "http://llama:8321"}, 0), ({"upstream": "https://search.example/v1/search"}, 2),
        ({"upstream": "http://store:9000"}, 2)]   # one URL (two keys): its worse state
