"""Metrics read from the gateway's state when scraped, never kept up to date on the
request path: the upstream capability mode, the database pool's use, the upstream
pool's connections, the asyncio tasks alive; and the
database's operation latency, timed around the database's own methods."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import urlsplit

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.observability.metrics import BY_NAME, Metrics
from gateway.storage.database import Database
from gateway.upstream.breaker import STATE_VALUES, CircuitBreaker
from gateway.upstream.capabilities import Capabilities


class StateCollector(Collector):
    def __init__(self, capabilities: Capabilities, api_setting: str, db: Database,
                 breaker: CircuitBreaker | None = None,
                 connections: Callable[[], tuple[int, int] | None] | None = None,
                 providers: Sequence[CircuitBreaker] = ()):
        self._capabilities = capabilities
        self._api = api_setting
        self._db = db
        self._breaker = breaker
        self._connections = connections   # the upstream pool's (busy, idle); None: not started
        self._providers = tuple(providers)   # the engine providers' circuits, each its own base URL

    def collect(self) -> Iterable[Any]:
        caps = self._capabilities
        if self._api != "auto":
            api = self._api
        else:
            api = "unknown" if caps.has_responses is None else "responses" if caps.has_responses \
                else "chat_completions"
        upstream = caps.conversations_upstream
        conversations = "unknown" if upstream is None else "upstream" if upstream else "gateway"
        mode = GaugeMetricFamily("gateway_upstream_capability_mode", BY_NAME["gateway_upstream_capability_mode"].help,
                                 labels=("api", "conversations"))
        mode.add_metric((api, conversations), 1)
        yield mode
        use = self._db.pool_use()
        pool = GaugeMetricFamily("gateway_db_pool_connections", BY_NAME["gateway_db_pool_connections"].help,
                                 labels=("state",))
        if use is not None:
            for state, count in zip(("in_use", "idle", "max"), use):
                pool.add_metric((state,), count)
        yield pool
        circuit = GaugeMetricFamily("gateway_upstream_circuit_state", BY_NAME["gateway_upstream_circuit_state"].help,
                                    labels=("upstream",))
        # One series per base URL: two clients of one URL (two keys) show the worse state.
        states: dict[str, int] = {}
        for breaker in (self._breaker, *self._providers):
            if breaker is not None:
                url = _shown_url(breaker.url)
                states[url] = max(states.get(url, 0), STATE_VALUES[breaker.state])
        for url, value in states.items():
            circuit.add_metric((url,), value)
        yield circuit
        # What a leak would pile up (issue 42: tests/e2e/test_leaks.py reads them).
        connections = GaugeMetricFamily("gateway_upstream_connections", BY_NAME["gateway_upstream_connections"].help,
                                        labels=("state",))
        counts = self._connections() if self._connections is not None else None
        if counts is not None:
            for state, count in zip(("busy", "idle"), counts):
                connections.add_metric((state,), count)
        yield connections
        tasks = GaugeMetricFamily("gateway_asyncio_tasks", BY_NAME["gateway_asyncio_tasks"].help)
        try:
            tasks.add_metric((), len(asyncio.all_tasks()))
        except RuntimeError:   # scraped outside the event loop (a test's registry): none
            pass
        yield tasks


def _shown_url(url: str) -> str:
    """The upstream's URL as a label: without credentials a URL may carry."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


# The database's methods timed, and the operation label each gets.
_TIMED = {"write": "write", "execute": "execute", "fetchall": "read"}


def time_database(db: Database, metrics: Metrics) -> None:
    """Time this database's statements (`gateway_db_operation_duration_seconds`): its
    methods are wrapped on the instance, so neither backend's code knows."""
    histogram = metrics.metric("gateway_db_operation_duration_seconds")
    for method, operation in _TIMED.items():
        setattr(db, method, _timed(getattr(db, method), histogram.labels(operation)))


def _timed(call: Callable[..., Any], timer: Any) -> Callable[..., Any]:
    @functools.wraps(call)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await call(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - started
            timer.pending.append(elapsed)   # Buckets.observe, inline (folded every second)
    return timed
