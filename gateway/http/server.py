"""Serving the application over TCP: what aiohttp's `web.run_app` does, with the
gateway's own per-connection protocol.

aiohttp bounds a request head's size (gateway/http/header_limits.py) but not its time:
a connection that sends its headers a byte at a time keeps what it sent in memory until
the keep-alive timeout (75 s from the connection's start, or from its last response).
`GatewayRequestHandler` gives each head `service.header_timeout_seconds` from its first
byte; a head still incomplete then gets 408 in the error envelope and the connection is
closed. Idle keep-alive connections (no byte of a next request yet) and request bodies
are not timed by it. `run_app` offers no way to choose the protocol class (its `Server`
makes aiohttp's `RequestHandler`), hence the runner and the loop below.

SIGTERM and SIGINT are the runner's own (not aiohttp's, which would start its shutdown
at once): the listener closes, `http/drain.py` gives running requests their grace
period, then aiohttp's shutdown and the application's cleanup run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from typing import Any, Callable

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler, _ErrInfo
from aiohttp.web_server import Server

from gateway.config import ServiceConfig
from gateway.http.drain import DRAIN
from gateway.http.header_limits import MAX_HEADERS, parser_limits
from gateway.http.responses_io import json_response
from gateway.schema.errors import ApiError

log = logging.getLogger("gateway.http")

# aiohttp's `run_app` default: how long a connection may stay open waiting for a request.
KEEPALIVE_SECONDS = 75.0
# After the drain (http/drain.py): how long aiohttp's shutdown waits for what still runs
# before cancelling it (the grace period is already over).
LEFTOVER_SECONDS = 1.0


class GatewayRequestHandler(RequestHandler):
    """aiohttp's protocol for one connection, with a deadline on each request head and
    parser errors answered in the error envelope, without quoting the request."""

    __slots__ = ("_header_timeout", "_header_timer", "_body", "_refused")

    def __init__(self, manager: Server, *, header_timeout: float, **kwargs: Any):
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._header_timer: asyncio.TimerHandle | None = None
        # The body of the latest request whose head arrived, until it is at its end: bytes
        # arriving meanwhile are body, not the next head.
        self._body: Any = None
        # A head the parser refused: the 400 is on its way and the connection closes after
        # it. aiohttp would go on feeding what still arrives to the failed parser, which
        # keeps it (MBs per connection with a long header line): it is dropped instead.
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._body is not None and self._body.is_eof():
            self._body = None
        head = data and self._body is None and self._payload_parser is None and not self._upgraded
        parsed = self._request_count
        super().data_received(data)
        if self._request_count != parsed and self._messages:
            message, body = self._messages[-1]
            self._body = None if body.is_eof() else body
            self._refused = isinstance(message, _ErrInfo)
            self._stop_header_timer()
        elif head and self._header_timer is None:
            # Part of a head: timed from here. A head that arrives whole (most do) costs no timer.
            self._header_timer = self._loop.call_later(self._header_timeout, self._head_too_slow)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_header_timer()
        self._body = None
        super().connection_lost(exc)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _head_too_slow(self) -> None:
        self._header_timer = None
        if self.transport is None or self._force_close:
            return
        if self._waiter is None or self._waiter.done():
            # A request of this connection is still being answered (the head is a
            # pipelined next one): its response is not cut; the head is checked again later.
            self._header_timer = self._loop.call_later(self._header_timeout, self._head_too_slow)
            return
        peer = self.transport.get_extra_info("peername")
        log.warning("closed a connection from %s: its request headers did not arrive within %g s "
                    "(service.header_timeout_seconds)", peer[0] if isinstance(peer, tuple) else peer,
                    self._header_timeout)
        error = ApiError(408, "Request timeout",
                         f"The request headers did not arrive within {self._header_timeout:g} seconds.",
                         code="request_timeout")
        body = orjson.dumps(error.body())
        self.transport.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        self.force_close()  # the transport closes once the reply is written

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        # aiohttp logs the error (header_limits' filter drops the quoted header) and
        # answers with the parser's message, which quotes the start of the offending line.
        response = super().handle_error(request, status, exc, message)
        if not isinstance(exc, HttpProcessingError):
            return response
        error = ApiError(status, "Bad request", _parser_cause(exc, self.max_field_size), code="malformed_request")
        reply = json_response(error.body(), status)
        reply.force_close()
        return reply


def _parser_cause(exc: HttpProcessingError, bound: int) -> str:
    if isinstance(exc, LineTooLong):
        return f"The request line or a request header exceeds {bound} bytes."
    if "Too many headers" in exc.message:
        return f"The request carries more than {MAX_HEADERS} headers."
    return "The request is not valid HTTP/1.1."


class GatewayServer(Server):
    """aiohttp's `Server`, making the gateway's protocol for each connection."""

    def __call__(self) -> RequestHandler:
        return GatewayRequestHandler(self, loop=self._loop, **self._kwargs)


class GatewayRunner(web.AppRunner):
    __slots__ = ()

    async def _make_server(self) -> Server:
        plain = await super()._make_server()  # starts the application
        return GatewayServer(plain.request_handler, request_factory=plain.request_factory,
                             handler_cancellation=plain.handler_cancellation, loop=asyncio.get_running_loop(),
                             **plain._kwargs)


def _backlog(site: web.BaseSite) -> list[socket.socket]:
    """The connections waiting in the site's listen backlog, accepted now (no await
    between this and closing the listener, so none is left to be reset)."""
    server: Any = getattr(site, "_server", None)
    taken: list[socket.socket] = []
    for listening in getattr(server, "sockets", None) or ():
        sock = socket.socket(fileno=os.dup(listening.fileno()))   # the listener itself stays the server's
        try:
            sock.setblocking(False)
            while True:
                conn, _ = sock.accept()
                conn.setblocking(False)
                taken.append(conn)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            log.warning("taking the listen backlog at shutdown failed: %s", exc)
        finally:
            sock.close()
    if taken:
        log.info("shutting down: %d connection(s) waiting in the listen backlog taken", len(taken))
    return taken


def run(app: web.Application, service: ServiceConfig, *, host: str, port: int, loop: asyncio.AbstractEventLoop,
        access_log: logging.Logger | None, announce: Callable[[str], None],
        sockets: list[socket.socket] | None = None) -> None:
    """Serve `app` on host:port (or, in a worker of `service.workers`, on the listening
    `sockets` the supervisor bound: `http/supervisor.py`) until SIGINT or SIGTERM, then
    drain (`http/drain.py`) and stop."""

    async def serve() -> None:
        runner = GatewayRunner(app, handle_signals=False, access_log=access_log,
                               handler_cancellation=True,
                               shutdown_timeout=LEFTOVER_SECONDS, keepalive_timeout=KEEPALIVE_SECONDS,
                               header_timeout=service.header_timeout_seconds, **parser_limits(service))
        drain = app[DRAIN]
        stop: asyncio.Future[None] = loop.create_future()

        def signalled() -> None:
            if stop.done():
                drain.hurry()   # a second signal: no more grace
            else:
                stop.set_result(None)

        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, signalled)
        await runner.setup()
        try:
            sites: list[web.BaseSite] = ([web.SockSite(runner, sock) for sock in sockets] if sockets
                                         else [web.TCPSite(runner, host, port)])
            for site in sites:
                await site.start()
            if sockets:
                from gateway.http.supervisor import announce_ready   # a worker only

                announce(f"worker serving on {', '.join(site.name for site in sites)}")
                announce_ready()
            else:
                announce(f"======== Running on {sites[0].name} ========")
            await stop
            # Connections the kernel already accepted (in the listen backlog) are taken
            # before the listener closes, which would reset them; new ones are refused.
            # A worker's socket is also held by the supervisor (http/supervisor.py), which
            # closed its copy first: this close is the last, after the queue was taken.
            waiting = [conn for site in sites for conn in _backlog(site)]
            for site in sites:
                await site.stop()
            if waiting and runner.server is not None:
                await asyncio.gather(*(loop.connect_accepted_socket(runner.server, conn) for conn in waiting),
                                     return_exceptions=True)
            await drain.run(app, runner.server)
        finally:
            await runner.cleanup()
            for number in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(number)

    asyncio.set_event_loop(loop)
    main = loop.create_task(serve())
    try:
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            # What the application left running ends before the loop closes.
            left = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
