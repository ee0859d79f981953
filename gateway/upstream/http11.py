"""A small HTTP/1.1 client for the one upstream origin: keep-alive connections, one
exchange at a time on each, the response body handed over as it arrives.

aiohttp's client builds a request object, a payload, a response object, stream readers
and timers for every call, several kilobytes held for a stream's life and about a third
of the gateway's CPU for a turn (measured with `bench/`). The upstream is one origin
that speaks plain HTTP/1.1 JSON and SSE, so this keeps only what that needs: a request
head rendered in one go, llhttp (`httptools`) parsing the answer in C, and a protocol
object per connection that is also the exchange's response.

Semantics the gateway relies on:
- a read timeout per idle gap (waiting for the head, and between body reads), never
  for a whole stream;
- `ConnectFailed` when no connection could be made (the caller may retry: nothing was
  sent); a reused keep-alive connection that the upstream had closed before answering
  is retried once on a new connection, inside `exchange()`;
- closing an exchange before its body ended aborts the connection at once, so the
  upstream sees a client that went away;
- backpressure: reading pauses while too much body waits for a slow reader.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from typing import Any, cast

import httptools

_HIGH_WATER = 256 * 1024      # body bytes buffered before the connection stops reading
_DNS_TTL_S = 300.0
# Read timeouts are checked by one watchdog per pool this often, not by a timer per
# read: a paced stream waits once per event, and a timer each time costs CPU and a
# few hundred bytes per open stream. A timeout fires up to this much late.
_WATCH_EVERY_S = 0.25


class UpstreamHttpError(Exception):
    """Base of the failures of an exchange."""


class ConnectFailed(UpstreamHttpError):
    """No connection could be made (refused, unresolvable, timed out): nothing was sent."""


class ReadTimeout(UpstreamHttpError, TimeoutError):
    """The upstream stayed silent longer than the read timeout."""


class Disconnected(UpstreamHttpError):
    """The connection ended, or the answer was not HTTP, before the answer was complete."""


class Interrupted(UpstreamHttpError):
    """The gateway ended the exchange itself (a shutdown's grace period is over)."""


class TurnDeadline(Interrupted):
    """The turn the exchange is for ran past `llama_stack.turn_deadline_seconds`."""


class Exchange(asyncio.Protocol):
    """One connection to the upstream, and the exchange it is carrying (one at a time)."""

    __slots__ = ("_pool", "_loop", "transport", "_parser", "status", "_body", "_size", "_complete", "_error",
                 "_head", "_keep_alive", "_delimited", "_waiter", "_deadline", "_timeout", "_paused", "_answered",
                 "idle_since", "holds_slot", "retry_after", "ends_at", "_whole")

    def __init__(self, pool: "Pool"):
        self._pool = pool
        self._loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.holds_slot = False   # counts against the pool's limit until the exchange ends
        self.ends_at = 0.0        # its turn's deadline (loop time; 0.0: none), checked by the watchdog
        self._waiter: asyncio.Future[Any] | None = None
        self._deadline = 0.0      # while waiting with a timeout: when it expires (loop time)
        self._reset(0.0)

    def _reset(self, timeout: float) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._error: BaseException | None = None
        self.status = 0
        self.retry_after: bytes | None = None   # the answer's `Retry-After` (upstream/retry.py)
        self._body: list[bytes] = []
        self._size = 0
        self._complete = False
        self._head = False
        self._keep_alive = False
        self._delimited = False   # the body has a length or is chunked (else: until the connection closes)
        self._paused = False
        self._answered = False    # any byte of the answer arrived
        self._whole = False       # `read()` wants the whole body: no backpressure
        self._timeout = timeout

    # -- what the pool and the client call ------------------------------------------------

    def send(self, data: bytes, timeout: float) -> None:
        self._reset(timeout)
        assert self.transport is not None
        self.transport.write(data)

    async def head(self) -> None:
        """Wait until the status line and headers have arrived."""
        while not self._head:
            await self._wait()

    async def read(self) -> bytes:
        """The whole body (and the connection goes back to the pool). Reading never
        pauses for it (a body past the high-water mark would otherwise wait for a
        `readany()` that never comes, until the read timeout)."""
        self._whole = True
        if self._paused:
            self._paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        while not self._complete:
            await self._wait()
        body = b"".join(self._body)
        self._body = []
        self.release()
        return body

    async def readany(self) -> bytes:
        """The body bytes that have arrived since the last call (waiting for some); b""
        once the body has ended."""
        while not self._body:
            if self._complete:
                return b""
            await self._wait()
        body = self._body
        chunk = body[0] if len(body) == 1 else b"".join(body)
        self._body = []
        self._size = 0
        if self._paused:
            self._paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        return chunk

    @property
    def at_eof(self) -> bool:
        return self._complete and not self._body

    def release(self) -> None:
        """Done with the exchange: a complete one leaves its connection for the next."""
        if self._complete and self._keep_alive and self._error is None and self.transport is not None \
                and not self.transport.is_closing():
            self._pool.give_back(self)
        else:
            self.close()

    def close(self) -> None:
        """Drop the connection now (the upstream sees the client go away)."""
        if self.transport is not None:
            self.transport.abort()
        self._pool.forget(self)

    # -- waiting -------------------------------------------------------------------------

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        waiter = self._waiter = self._loop.create_future()
        if self._timeout:
            self._deadline = self._loop.time() + self._timeout
        try:
            await waiter
        finally:
            self._waiter = None
            self._deadline = 0.0
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def expire(self, now: float) -> None:
        """The pool's watchdog: fail the wait if its deadline has passed, and the exchange
        (dropping its connection) if its turn's has."""
        if self._deadline and now >= self._deadline:
            self._deadline = 0.0
            self._fail(ReadTimeout(f"the upstream sent nothing for {self._timeout:g} s"))
        if self.ends_at and now >= self.ends_at:
            self.ends_at = 0.0
            self._fail(TurnDeadline("The turn ran past its deadline (llama_stack.turn_deadline_seconds)."))
            if self.transport is not None:
                self.transport.abort()

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake()

    # -- asyncio.Protocol and the parser's callbacks ---------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)   # a TCP connection's: a full Transport

    def data_received(self, data: bytes) -> None:
        self._answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(Disconnected(f"the upstream's answer is not valid HTTP: {exc}"))
            assert self.transport is not None
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.forget(self)
        if self._head and not self._delimited and not self._complete:
            self._complete = True  # a body that runs until the connection closes has ended
            self._wake()
        elif not self._complete:
            self._fail(Disconnected(f"the upstream closed the connection{f' ({exc})' if exc else ''}"))

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered in (b"content-length", b"transfer-encoding"):
            self._delimited = True
        elif lowered == b"retry-after":
            self.retry_after = value

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()
        self._head = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._size += len(body)
        if self._size > _HIGH_WATER and not self._paused and not self._whole:
            self._paused = True
            assert self.transport is not None
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self._complete = True
        self._wake()


class Pool:
    """Connections to one origin: at most `limit` at once, idle ones reused (most
    recently used first) and closed after `idle_s`."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, *, limit: int, connect_timeout: float,
                 idle_s: float):
        self.loop = asyncio.get_running_loop()
        self._host, self._port, self._tls = host, port, tls
        self._slots = asyncio.Semaphore(limit)
        self._connect_timeout = connect_timeout
        self._idle_s = idle_s
        self._idle: deque[Exchange] = deque()
        self._busy: set[Exchange] = set()
        self._addresses: list[tuple[Any, ...]] = []
        self._resolved_at = 0.0
        self._sweeping = False
        self._closed = False
        self._watchdog = self.loop.call_later(_WATCH_EVERY_S, self._watch)

    async def exchange(self, data: bytes, timeout: float, ends_at: float = 0.0) -> Exchange:
        """Send a request; the exchange once the answer's head has arrived. `ends_at`:
        its turn's deadline (loop time), after which it fails with `TurnDeadline`."""
        await self._slots.acquire()
        conn = None
        try:
            conn = self._reuse()
            if conn is not None:
                conn.ends_at = ends_at
                conn.send(data, timeout)
                try:
                    await conn.head()
                    return conn
                except Disconnected:
                    if conn._answered:
                        raise
                    # A kept-alive connection the upstream had already closed: the request
                    # never reached it, so it goes again on a new connection (with the slot).
                    stale, conn = conn, None
                    self._drop(stale, keep_slot=True)
            conn = await self._connect()
            conn.ends_at = ends_at
            conn.send(data, timeout)
            await conn.head()
            return conn
        except BaseException:
            if conn is not None:
                conn.close()
            else:
                self._slots.release()
            raise

    def give_back(self, conn: Exchange) -> None:
        self._drop(conn)
        if self._closed or conn.transport is None:
            conn.transport.abort() if conn.transport is not None else None
            return
        conn.idle_since = time.monotonic()
        conn.ends_at = 0.0
        self._idle.append(conn)
        if not self._sweeping:
            self._sweeping = True
            self.loop.call_later(self._idle_s, self._sweep)

    def forget(self, conn: Exchange) -> None:
        """The connection is closing: it is neither busy nor idle any more."""
        self._drop(conn)
        try:
            self._idle.remove(conn)
        except ValueError:
            pass

    def _drop(self, conn: Exchange, keep_slot: bool = False) -> None:
        """The exchange on `conn` is over: its slot goes back (or to a retry)."""
        self._busy.discard(conn)
        if conn.holds_slot:
            conn.holds_slot = False
            if not keep_slot:
                self._slots.release()
        if keep_slot and conn.transport is not None:
            conn.transport.abort()

    def interrupt(self, error: UpstreamHttpError) -> int:
        """Fail every exchange in progress with `error` and drop its connection (the
        upstream sees a client that went away); how many there were."""
        busy = list(self._busy)
        for conn in busy:
            conn._fail(error)
            if conn.transport is not None:
                conn.transport.abort()
        return len(busy)

    def counts(self) -> tuple[int, int]:
        """Its connections: (busy, idle), for `gateway_upstream_connections`."""
        return len(self._busy), len(self._idle)

    def close(self) -> None:
        self._closed = True
        self._watchdog.cancel()
        for conn in list(self._idle) + list(self._busy):
            if conn.transport is not None:
                conn.transport.abort()
        self._idle.clear()

    def _reuse(self) -> Exchange | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing():
                self._hold(conn)
                return conn
        return None

    def _hold(self, conn: Exchange) -> None:
        self._busy.add(conn)
        conn.holds_slot = True

    def _watch(self) -> None:
        now = self.loop.time()
        for conn in list(self._busy):
            conn.expire(now)
        self._watchdog = self.loop.call_later(_WATCH_EVERY_S, self._watch)

    def _sweep(self) -> None:
        """Close connections idle for longer than `idle_s`: each holds buffers and a
        socket, and after a burst they would all stay."""
        cutoff = time.monotonic() - self._idle_s
        while self._idle and self._idle[0].idle_since <= cutoff:
            conn = self._idle.popleft()
            if conn.transport is not None:
                conn.transport.close()
        self._sweeping = bool(self._idle)
        if self._sweeping:
            self.loop.call_later(self._idle_s, self._sweep)

    async def _connect(self) -> Exchange:
        conn = Exchange(self)
        last: BaseException | None = None
        for family, address in await self._resolve():
            try:
                await asyncio.wait_for(self.loop.create_connection(
                    lambda: conn, host=address[0], port=address[1], family=family, ssl=self._tls,
                    server_hostname=self._host if self._tls else None), self._connect_timeout)
            except (OSError, asyncio.TimeoutError) as exc:
                last = exc
                continue
            self._hold(conn)
            return conn
        raise ConnectFailed(f"{self._host}:{self._port}: {_reason(last)}")

    async def _resolve(self) -> list[tuple[Any, ...]]:
        """The origin's addresses, looked up at most every five minutes."""
        now = time.monotonic()
        if not self._addresses or now - self._resolved_at > _DNS_TTL_S:
            try:
                infos = await self.loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
            except OSError as exc:
                if self._addresses:
                    return self._addresses  # keep what worked while the resolver does not
                raise ConnectFailed(f"{self._host}: {_reason(exc)}") from None
            self._addresses = [(family, address[:2]) for family, _, _, _, address in infos]
            self._resolved_at = now
        return self._addresses


def _reason(exc: BaseException | None) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "the connection timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
