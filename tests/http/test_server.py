"""The gateway's per-connection protocol, served in-process on a loopback port and spoken
to over a raw socket: a request head gets `service.header_timeout_seconds` from its first
byte (then 408 in the envelope and the connection closed), while a whole head, an idle
keep-alive connection and a slow body are not timed; the parser's refusals are the
envelope without the request quoted. (Through `gateway serve`: tests/e2e/test_header_limits.py.)"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from gateway.config import ServiceConfig
from gateway.http.header_limits import parser_limits
from gateway.http.server import GatewayRunner

TIMEOUT = 0.3


async def echo(request: web.Request) -> web.Response:
    return web.Response(text=f"got {len(await request.read())}")


@pytest.fixture
async def port(unused_tcp_port):
    app = web.Application()
    app.router.add_route("*", "/", echo)
    service = ServiceConfig(header_timeout_seconds=TIMEOUT, max_header_bytes=1024)
    runner = GatewayRunner(app, handler_cancellation=True, header_timeout=TIMEOUT, **parser_limits(service))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    yield unused_tcp_port
    await runner.cleanup()


async def reply(reader: asyncio.StreamReader, within: float = 3.0) -> tuple[str, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), within)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    return head.decode(), await asyncio.wait_for(reader.readexactly(length), within)


async def test_a_head_trickled_past_the_deadline_is_408_and_closed(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    head, body = await reply(reader)
    assert head.startswith("HTTP/1.1 408") and "Connection: close" in head
    assert json.loads(body)["detail"]["cause"] == f"The request headers did not arrive within {TIMEOUT:g} seconds."
    assert await asyncio.wait_for(reader.read(), 3) == b""   # closed
    writer.close()


async def test_idle_keep_alive_and_a_slow_body_are_not_timed(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
    await writer.drain()
    await asyncio.sleep(TIMEOUT * 2)   # the body is late, not the head
    writer.write(b"cd")
    head, body = await reply(reader)
    assert head.startswith("HTTP/1.1 200") and body == b"got 4"
    await asyncio.sleep(TIMEOUT * 2)   # idle between requests: no byte of a next head yet
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head, body = await reply(reader)
    assert head.startswith("HTTP/1.1 200") and body == b"got 0"
    writer.close()


@pytest.mark.parametrize("head, cause", [
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Secret s3cret-no-colon\r\n\r\n", "The request is not valid HTTP/1.1."),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: s3cret\r\n" % n for n in range(70)) + b"\r\n",
     "The request carries more than 64 headers."),
])
async def test_a_parser_refusal_is_the_envelope_without_the_request(port, head, cause):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head)
    await writer.drain()
    answer, body = await reply(reader)
    assert answer.split()[1] == "400" and b"s3cret" not in body
    error = json.loads(body)
    assert error["error"]["code"] == "malformed_request" and error["detail"]["cause"] == cause
    assert await asyncio.wait_for(reader.read(), 3) == b""   # closed after the answer
    writer.close()
