"""A configured JSON endpoint (engine/json_service.py) against a real loopback server:
how each kind of answer is classified."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from gateway.engine.json_service import JsonService, ServiceRefused, ServiceUnavailable


async def handler(request: web.Request) -> web.Response:
    body = await request.json()
    kind = body.get("kind")
    if kind == "slow":
        await asyncio.sleep(5)
    if kind == "refused":
        return web.json_response({"error": {"message": "no such model"}}, status=400)
    if kind == "broken":
        return web.json_response({"detail": "boom"}, status=502)
    if kind == "text":
        return web.Response(text="<html>")
    return web.json_response({"echo": body, "authorization": request.headers.get("Authorization")})


@pytest.fixture
async def server(aiohttp_server):
    app = web.Application()
    app.router.add_post("/api/check", handler)
    return await aiohttp_server(app)


async def service(url: str, **kwargs) -> JsonService:
    started = JsonService.at(url, kwargs.get("api_key"), kwargs.get("timeout", 1), "The test service")
    await started.start()
    return started


async def test_answers_and_failures(server):
    endpoint = await service(str(server.make_url("/api/check")), api_key="k-1")
    try:
        assert await endpoint.post({"kind": "ok"}) == {"echo": {"kind": "ok"}, "authorization": "Bearer k-1"}
        with pytest.raises(ServiceRefused, match="no such model"):
            await endpoint.post({"kind": "refused"})
        with pytest.raises(ServiceUnavailable, match=r"The test service failed \(HTTP 502\)"):
            await endpoint.post({"kind": "broken"})
        with pytest.raises(ServiceUnavailable, match="not JSON"):
            await endpoint.post({"kind": "text"})
        with pytest.raises(ServiceUnavailable, match="did not answer within 1 s"):
            await endpoint.post({"kind": "slow"})
    finally:
        await endpoint.close()


async def test_a_server_without_the_endpoint_is_unavailable_not_a_refusal(server):
    endpoint = await service(str(server.make_url("/api/nowhere")))
    try:
        with pytest.raises(ServiceUnavailable, match=r"has no such endpoint \(HTTP 404\)"):
            await endpoint.post({})
    finally:
        await endpoint.close()


async def test_an_unreachable_server(unused_tcp_port):
    endpoint = await service(f"http://127.0.0.1:{unused_tcp_port}")
    try:
        with pytest.raises(ServiceUnavailable, match="could not be reached"):
            await endpoint.post({})
    finally:
        await endpoint.close()


async def test_a_failing_provider_is_not_asked_once_its_circuit_opened(aiohttp_server):
    hits: list[int] = []

    async def broken(request: web.Request) -> web.Response:
        hits.append(1)
        return web.json_response({"detail": "boom"}, status=503)

    app = web.Application()
    app.router.add_post("/search", broken)
    server = await aiohttp_server(app)
    endpoint = JsonService.at(str(server.make_url("/search")), None, 1, "The test service", circuit=(2, 60))
    await endpoint.start()
    try:
        for _ in range(2):
            with pytest.raises(ServiceUnavailable, match=r"failed \(HTTP 503\)"):
                await endpoint.post({})
        assert [breaker.state for breaker in endpoint.breakers()] == ["open"]
        started = asyncio.get_running_loop().time()
        with pytest.raises(ServiceUnavailable, match=r"The test service is failing: not asked \(circuit open after "
                                                     r"2 failure\(s\) in a row; next try in 60 s\)"):
            await endpoint.post({})
        assert asyncio.get_running_loop().time() - started < 0.1 and len(hits) == 2   # at once, not asked
    finally:
        await endpoint.close()


async def test_no_circuit_when_turned_off(server):
    endpoint = JsonService.at(str(server.make_url("/api/check")), None, 1, "The test service", circuit=(0, 10))
    assert endpoint.breakers() == []
