"""Readiness as LCORE answers it: healthy, or 503 naming each problem and its impacts
(the database, the upstream answering an error, the upstream unreachable), and LCORE's
degraded mode (started without the upstream: ready, saying so). (Through `gateway serve`:
tests/e2e/test_endpoints.py, test_metrics.py's degraded mode.)"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.http.health import liveness, readiness
from gateway.http.services import SERVICES
from gateway.schema.errors import upstream_unavailable
from gateway.upstream.breaker import CircuitBreaker
from gateway.upstream.client import Reply


class Db:
    def __init__(self, up: bool):
        self.up = up

    async def ping(self) -> None:
        if not self.up:
            raise ConnectionError("no route to database")


class Upstream:
    def __init__(self, status: int | None, breaker: CircuitBreaker | None = None):
        self.status = status
        self.breaker = breaker   # the upstream's circuit (None: turned off)

    async def request(self, method: str, path: str, **_: object) -> Reply:
        assert (method, path) == ("GET", "/v1/models")
        if self.status is None:
            raise upstream_unavailable("Llama Stack")
        return Reply(self.status, b"{}")


async def probe(db_up: bool = True, upstream: int | None = 200, degraded: bool = False,
                breaker: CircuitBreaker | None = None) -> tuple[int, dict]:
    app = web.Application()
    app[SERVICES] = SimpleNamespace(db=Db(db_up), upstream=Upstream(upstream, breaker), degraded=degraded)   # type: ignore[misc]
    response = await readiness(make_mocked_request("GET", "/readiness", app=app))
    assert response.body is not None
    return response.status, json.loads(response.body)


async def test_liveness_needs_nothing():
    response = await liveness(make_mocked_request("GET", "/liveness"))
    assert response.status == 200 and response.body == b'{"alive":true}'


async def test_healthy():
    assert await probe() == (200, {"ready": True, "reason": "All providers are healthy", "overall_status": "healthy",
                                   "impacts": None, "providers": []})


@pytest.mark.parametrize("db_up, upstream, reason, impacts", [
    (False, 200, "Database unavailable", ["Conversations and turns cannot be stored"]),
    (True, 500, "Backend service answered HTTP 500", ["LLM inference unavailable"]),
    (True, None, "Cannot connect to backend service",
     ["LLM inference unavailable", "Provider health checks unavailable"]),
    (False, 502, "Database unavailable; Backend service answered HTTP 502",
     ["Conversations and turns cannot be stored", "LLM inference unavailable"]),
])
async def test_each_problem_is_named_with_its_impacts(db_up, upstream, reason, impacts):
    status, body = await probe(db_up, upstream)
    assert status == 503 and body["ready"] is False and body["overall_status"] == "unhealthy"
    assert (body["reason"], body["impacts"]) == (reason, impacts)


async def test_degraded_mode_is_ready_without_the_upstream_but_not_without_the_database():
    status, body = await probe(upstream=None, degraded=True)
    assert status == 200 and body["ready"] is True and body["overall_status"] == "degraded"
    assert (await probe(db_up=False, upstream=None, degraded=True))[0] == 503
    assert (await probe(upstream=500, degraded=True))[0] == 503   # an answering upstream that fails is not degraded


async def test_an_open_circuit_is_named_with_its_failures_and_next_probe():
    now = [100.0]
    breaker = CircuitBreaker("http://upstream", threshold=2, cooldown=30, clock=lambda: now[0])
    breaker.failed("refused")
    breaker.failed("refused")
    now[0] += 10
    status, body = await probe(upstream=None, breaker=breaker)
    assert status == 503
    assert body["reason"] == ("Cannot connect to backend service (circuit breaker open after 2 failures; "
                              "next probe in 20 s)")
