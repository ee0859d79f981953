"""A streamed turn's writes to its client, bounded (issue 42): what the gateway holds
unsent for a connection may pass `service.max_client_write_buffer_bytes` only for
`service.client_drain_timeout_seconds`; a client that has not taken it by then stopped
reading, and is cut. The end of a stream waits for the client as long.

Why a bound with a timeout, and not aiohttp's own writes (which await `drain()` once
64 KiB went out since the last one): that await never ends for a client that stops
reading (the peer's kernel keeps a zero TCP window open for ever), holding the turn, its
upstream stream and its connection for as long as the client likes. A timeout around
every write would cost a timer per upstream read on the hot path. Writing without
awaiting `drain()` and reading `get_write_buffer_size()` before each write costs one call;
only a connection already past the bound waits (with a timer) for its client, so a
client that reads, however slowly, is never cut, a large event (bigger than the bound on
its own) goes out whole, and memory per stream is at most the bound plus one upstream
read's frames.

A cut client is a client that left: `SlowClient` is a `ConnectionError`, so
`turns.run.client_left()` is true and the turn is abandoned, charged as when its client
leaves (docs/quotas.md), and its transport is aborted (its buffer freed at once).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, NoReturn, cast

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_writer import StreamWriter

from gateway.config.service import ServiceConfig

log = logging.getLogger("gateway.http")

# Less than the transports' default high-water mark (64 KiB, asyncio's and uvloop's) with
# room for the chunked encoding's framing: a write that leaves less buffered cannot pause
# its transport, so its `drain()` returns at once.
_NEVER_PAUSES = 32 * 1024


class SlowClient(ConnectionResetError):
    """The gateway cut a client that stopped reading (its reason in the message)."""


class ClientWrites:
    """One streaming connection's writes: `write` per upstream read, `eof` at the end."""

    __slots__ = ("_writer", "_transport", "_limit", "_timeout", "_request_id")

    def __init__(self, writer: AbstractStreamWriter | None, transport: asyncio.BaseTransport | None, limit: int,
                 timeout: float, request_id: str):
        # aiohttp's server writer; its transport None when the client already left.
        self._writer = cast(StreamWriter, writer)
        self._transport = cast("asyncio.WriteTransport | None", transport)
        self._limit = limit
        self._timeout = timeout
        self._request_id = request_id

    def write(self, frames: bytes) -> Awaitable[None]:
        # speed: a plain function handing back the writer's own coroutine (no coroutine
        # of its own per upstream read); the bound is checked before each write, so what is held is at most the bound and
        # one read's frames.
        transport = self._transport
        if transport is None or transport.get_write_buffer_size() > self._limit:
            return self._write_behind(frames)
        return self._writer.write(frames, drain=False)

    async def _write_behind(self, frames: bytes) -> None:
        """A client behind by more than the bound (or gone): wait for it, then write."""
        transport = self._transport
        if transport is None:
            raise ConnectionResetError("the client's connection is closed")
        await self._catch_up(transport)
        await self._writer.write(frames, drain=False)

    async def _catch_up(self, transport: asyncio.WriteTransport) -> None:
        """Over the bound: the client has `client_drain_timeout_seconds` to take it (the
        transport resumes writing below its low-water mark), the turn waiting meanwhile."""
        unsent = transport.get_write_buffer_size()
        try:
            async with asyncio.timeout(self._timeout):
                await self._writer.drain()
        except TimeoutError:
            self.cut(f"{unsent} bytes unread, over service.max_client_write_buffer_bytes ({self._limit}), "
                     f"not taken within {self._timeout:g} s (service.client_drain_timeout_seconds)")

    async def eof(self, frames: bytes, write_eof: Callable[[bytes], Awaitable[None]]) -> None:
        """The last frames and the end of the stream (`write_eof`, which drains): the
        client has `client_drain_timeout_seconds` to take what is unsent."""
        transport = self._transport
        if transport is None:
            raise ConnectionResetError("the client's connection is closed")
        if transport.get_write_buffer_size() + len(frames) < _NEVER_PAUSES:
            # speed: its drain cannot wait (no timer per stream)
            await write_eof(frames)
            return
        try:
            async with asyncio.timeout(self._timeout):
                await write_eof(frames)
        except TimeoutError:
            self.cut(f"{transport.get_write_buffer_size()} bytes still unread "
                     f"{self._timeout:g} s after the end of the stream (service.client_drain_timeout_seconds)")

    def cut(self, reason: str) -> NoReturn:
        log.warning("client of request %s stopped reading: %s; connection closed, turn abandoned",
                    self._request_id, reason)
        if self._transport is not None:
            self._transport.abort()
        raise SlowClient(f"the client stopped reading: {reason}")


def client_writes(request: web.Request, writer: AbstractStreamWriter | None, service: ServiceConfig) -> ClientWrites:
    """The bounded writes of `request`'s prepared response (`writer`, what `prepare()`
    returned: None when the client had already left)."""
    return ClientWrites(writer, None if writer is None else request.transport, service.max_client_write_buffer_bytes,
                        service.client_drain_timeout_seconds, request["request_id"])
