"""The one aiohttp client session to the upstream: timeouts, retries, error mapping.

Timeouts are per idle gap (`sock_read`), not per request, so a long stream that keeps
sending is never cut. Retries happen only when no connection could be made, so a
request is never sent twice and nothing is retried once bytes have arrived.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Mapping

import aiohttp
from aiohttp.payload import BytesPayload
import orjson
from yarl import URL

from gateway.config import LlamaStackConfig
from gateway.schema.errors import ApiError, upstream_unavailable
from gateway.upstream.errors import map_upstream_error

log = logging.getLogger("gateway.upstream")

# Idle upstream connections are closed after this long: each holds aiohttp's
# per-connection state (protocol, parser, buffers, several KiB), and after a burst 30 s
# kept them all. Under steady load a connection is reused well within it.
KEEPALIVE_S = 3.0


@dataclass
class Reply:
    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return orjson.loads(self.body)


class UpstreamClient:
    def __init__(self, config: LlamaStackConfig):
        self.base_url = config.url.rstrip("/")
        self.display_name = config.display_name
        self._config = config
        self._headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}  # parsed once: yarl parsing is per-request cost otherwise

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=self._config.max_connections, limit_per_host=0,
                                         keepalive_timeout=KEEPALIVE_S, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(self._config.timeout, 10),
                                        sock_read=self._config.timeout)
        # No cookie jar (the upstream API is stateless) and no compression (bodies are
        # small, links are local): both cost CPU on every request for nothing.
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout,
                                              cookie_jar=aiohttp.DummyCookieJar(),
                                              skip_auto_headers=("Accept-Encoding",))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "UpstreamClient.start() was not called"
        return self._session

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None, params: Mapping[str, str] | None = None,
                      timeout: float | None = None) -> Reply:
        """Send a request and read the whole answer; any status is returned, not raised.
        (Without `open()`'s context manager: two upstream calls per new-conversation turn
        make its generator machinery a measurable share of a JSON turn.)"""
        resp = await self._send(method, path, json, headers, params, timeout)
        try:
            body = await resp.read()
        except BaseException as exc:
            resp.close()
            if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError)):
                raise self._unavailable(method, path, exc) from None
            raise
        resp.release()
        return Reply(resp.status, body)

    async def request_ok(self, method: str, path: str, *, model: str | None = None, **kwargs: Any) -> Reply:
        """Like `request`, but a non-2xx answer raises the mapped `ApiError`."""
        reply = await self.request(method, path, **kwargs)
        if not reply.ok:
            raise map_upstream_error(reply.status, reply.body, model)
        return reply

    def open(self, method: str, path: str, *, json: Any = None, headers: Mapping[str, str] | None = None,
             params: Mapping[str, str] | None = None, timeout: float | None = None) -> "Opened":
        """`async with client.open(...) as resp`: the upstream response with its body unread
        (for streams)."""
        return Opened(self._send(method, path, json, headers, params, timeout))

    async def _send(self, method: str, path: str, json: Any, headers: Mapping[str, str] | None,
                    params: Mapping[str, str] | None, timeout: float | None) -> aiohttp.ClientResponse:
        """The response once its head arrived; connection failures retried, then mapped."""
        url = self._urls.get(path)
        if url is None:
            url = URL(self.base_url + path)
            if len(self._urls) < 64:  # the fixed endpoints, not every response id
                self._urls[path] = url
        all_headers = {**self._headers, **headers} if headers else self._headers
        # A ready payload skips aiohttp's payload lookup; the compact copy matters for
        # streams: orjson's result sits in a ~4 KiB block held for the stream's life.
        data = BytesPayload(bytes(memoryview(orjson.dumps(json))), content_type="application/json") \
            if json is not None else None
        client_timeout = aiohttp.ClientTimeout(total=timeout) if timeout else None
        attempt = 0
        while True:
            try:
                return await self.session.request(method, url, data=data, headers=all_headers, params=params,
                                                  **({"timeout": client_timeout} if client_timeout else {}))
            except aiohttp.ClientConnectorError as exc:
                if attempt >= self._config.max_retries:
                    raise self._unavailable(method, path, exc) from None
                attempt += 1
                delay = self._config.retry_delay * 2 ** (attempt - 1)
                log.warning("upstream %s %s: %s; retry %d in %.1fs", method, path, _describe(exc), attempt, delay)
                await asyncio.sleep(delay)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                raise self._unavailable(method, path, exc) from None

    def _unavailable(self, method: str, path: str, exc: BaseException) -> ApiError:
        """LCORE's 503 (`Connection error.`, or `Request timed out.` as the OpenAI client
        says); what the socket said goes to the log, not to the client."""
        log.warning("upstream %s %s unreachable: %s", method, path, _describe(exc))
        cause = "Request timed out." if isinstance(exc, asyncio.TimeoutError) else "Connection error."
        return upstream_unavailable(self.display_name, cause)


class Opened:
    """The context manager `open()` returns. A plain object, not `@asynccontextmanager`:
    a generator's frame would be held for a stream's whole life (memory per open stream
    is a budget)."""

    __slots__ = ("_sending", "_resp")

    def __init__(self, sending: Awaitable[aiohttp.ClientResponse]):
        self._sending = sending
        self._resp: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> aiohttp.ClientResponse:
        sending, self._sending = self._sending, None
        self._resp = await sending
        return self._resp

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        resp = self._resp
        assert resp is not None
        if exc_type is None and resp.content.at_eof():
            resp.release()
        else:
            resp.close()  # drops the connection: the upstream sees the client go away at once


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "The upstream did not answer in time."
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"Connection error: {exc.os_error.strerror if exc.os_error else exc}."
    return f"Connection error: {exc or type(exc).__name__}."


__all__ = ["ApiError", "Opened", "Reply", "UpstreamClient"]
