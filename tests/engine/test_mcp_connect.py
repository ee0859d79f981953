"""The guarded httpx2 client of clients' own MCP servers (gateway/engine/mcp_connect.py),
against a real aiohttp server on loopback."""

from __future__ import annotations

import httpx2
import pytest
from aiohttp import web

from gateway.destinations import DestinationPolicy
from gateway.engine.mcp_connect import guarded_client, refusal_of


@pytest.fixture
async def server(aiohttp_server):
    hits: list[str] = []

    async def hello(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="hello")

    async def bounce(request: web.Request) -> web.Response:
        hits.append(request.path)
        raise web.HTTPTemporaryRedirect(f"http://127.0.0.1:{request.url.port}/hello")

    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_get("/bounce", bounce)
    srv = await aiohttp_server(app, host="127.0.0.1")
    srv.hits = hits
    return srv


async def get(policy: DestinationPolicy, url: str) -> httpx2.Response:
    async with guarded_client(policy, timeout=httpx2.Timeout(5)) as client:
        return await client.get(url, follow_redirects=True)


async def test_a_loopback_server_is_refused_at_connect_time(server):
    for host in ("127.0.0.1", "localhost"):
        with pytest.raises(httpx2.ConnectError) as caught:
            await get(DestinationPolicy(), f"http://{host}:{server.port}/hello")
        assert "loopback" in str(refusal_of(caught.value))
    assert server.hits == []


async def test_the_allow_list_lets_it_in(server):
    reply = await get(DestinationPolicy.of(["127.0.0.1/32", "::1/128"]), f"http://localhost:{server.port}/hello")
    assert reply.text == "hello"
    reply = await get(DestinationPolicy.of(["localhost"]), f"http://localhost:{server.port}/hello")
    assert reply.text == "hello" and server.hits == ["/hello", "/hello"]


async def test_a_redirect_to_a_forbidden_address_is_refused(server):
    # `localhost` is allowed by name; the redirect names 127.0.0.1, which is not.
    with pytest.raises(httpx2.ConnectError) as caught:
        await get(DestinationPolicy.of(["localhost"]), f"http://localhost:{server.port}/bounce")
    assert "'127.0.0.1' is not allowed: it is a loopback address" in str(refusal_of(caught.value))
    assert server.hits == ["/bounce"]


async def test_a_name_that_does_not_resolve_is_a_connect_error():
    with pytest.raises(httpx2.ConnectError) as caught:
        await get(DestinationPolicy(), "http://no-such-host.invalid/mcp")
    assert "cannot be resolved" in str(refusal_of(caught.value))


async def test_proxies_from_the_environment_are_not_used(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://10.0.0.1:3128")
    monkeypatch.setenv("ALL_PROXY", "http://10.0.0.1:3128")
    reply = await get(DestinationPolicy.of(["127.0.0.1/32", "::1/128"]), f"http://127.0.0.1:{server.port}/hello")
    assert reply.text == "hello"
