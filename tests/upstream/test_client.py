"""The gateway's client of the upstream, against a small aiohttp upstream on loopback:
what a request carries (the base path, the key, the request id of the call's request,
JSON and query), headers with line breaks refused, a connection that cannot be made
retried with backoff and then LCORE's 503, an answer that does not come in time the
OpenAI client's 503, and the hooks metrics hang on."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from gateway.config import LlamaStackConfig
from gateway.request_scope import REQUEST
from gateway.schema.errors import ApiError
from gateway.upstream import client as client_module
from gateway.upstream.client import UpstreamClient, UpstreamHooks


@pytest.fixture
async def upstream(aiohttp_server):
    seen: list[web.Request] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request)
        body = await request.read()
        if request.path.endswith("/slow"):
            await asyncio.sleep(2)
        return web.json_response({"path": request.path_qs, "body": body.decode()})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/"), seen


async def started(**config) -> UpstreamClient:
    client = UpstreamClient(LlamaStackConfig(**config))
    await client.start()
    return client


async def test_what_a_request_carries(upstream):
    url, seen = upstream
    client = await started(url=url + "/base", api_key="sk-upstream")
    token = REQUEST.set(("req-42", "/v1/responses"))
    try:
        reply = await client.request("POST", "/v1/responses", json={"input": "hi"}, params={"a": "1 2"},
                                     headers={"X-Extra": "yes"})
    finally:
        REQUEST.reset(token)
        await client.close()
    assert reply.ok and reply.json() == {"path": "/base/v1/responses?a=1+2", "body": '{"input":"hi"}'}
    headers = seen[0].headers
    assert headers["Authorization"] == "Bearer sk-upstream" and headers["X-Request-ID"] == "req-42"
    assert headers["X-Extra"] == "yes" and headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("lightspeed-gateway/")


async def test_a_header_with_a_line_break_is_never_sent(upstream):
    url, seen = upstream
    client = await started(url=url)
    try:
        with pytest.raises(ValueError, match="line break"):
            await client.request("GET", "/v1/models", headers={"X-Forwarded": "a\r\nX-Injected: 1"})
    finally:
        await client.close()
    assert seen == []


class Hooks(UpstreamHooks):
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def answered(self, path: str, status: int, seconds: float) -> None:
        self.seen.append(("answered", path, status))

    def failed(self, path: str, outcome: str, seconds: float) -> None:
        self.seen.append(("failed", path, outcome))

    def retried(self, path: str, outcome: str) -> None:
        self.seen.append(("retried", path, outcome))


async def test_a_connection_that_cannot_be_made_is_retried_then_503(unused_tcp_port, monkeypatch, caplog):
    delays: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(client_module.asyncio, "sleep", sleep)
    client = await started(url=f"http://127.0.0.1:{unused_tcp_port}", max_retries=2, retry_delay=0.5,
                           display_name="Upstream X")
    client.hooks = hooks = Hooks()
    try:
        with pytest.raises(ApiError) as refused:
            await client.request("GET", "/v1/models")
    finally:
        await client.close()
    # The backoff doubles, jittered: half of it fixed, half random (`upstream/retry.py`).
    assert len(delays) == 2 and 0.25 <= delays[0] <= 0.5 and 0.5 <= delays[1] <= 1.0
    assert hooks.seen == [("retried", "/v1/models", "connect_error")] * 2 + [("failed", "/v1/models", "connect_error")]
    error = refused.value
    assert (error.status, error.response, error.cause) == (503, "Unable to connect to Upstream X", "Connection error.")
    assert str(unused_tcp_port) not in error.cause   # the socket's words go to the log only


async def test_an_answer_that_does_not_come_in_time_is_never_retried(upstream):
    url, seen = upstream
    client = await started(url=url, max_retries=3)
    client.hooks = hooks = Hooks()
    try:
        with pytest.raises(ApiError) as refused:
            await client.request("GET", "/slow", timeout=0.2)
        ok = await client.request("GET", "/v1/models")
    finally:
        await client.close()
    assert refused.value.status == 503 and refused.value.cause == "Request timed out."
    assert len([request for request in seen if request.path == "/slow"]) == 1   # sent once
    assert hooks.seen == [("failed", "/slow", "timeout"), ("answered", "/v1/models", 200)] and ok.ok
