"""`/v1/responses` over a WebSocket (OpenResponses 2026-04-24): the aiohttp side of
the transport. The protocol and the connection-local state are `ws_protocol.py`; the
framing is `streaming/websocket.py`'s `WebSocketFraming`; a turn is prepared and run by the turn service
exactly as `POST /v1/responses` with `stream: true` (this is one more sink of the
runner).

The upgrade is a `GET /v1/responses` with `Upgrade: websocket`: the middleware has
authenticated and authorized it like any request (a refusal is the HTTP error), and
this module checks `Origin` against the CORS configuration and the user's open
sockets before upgrading. Then:

- the handler reads messages; a `response.create` is validated as it arrives (every
  refusal the request gets from itself alone, `TurnService.check`: the same validation
  as the HTTP endpoint's) and joins the connection's queue as the text that came
  (bounded in messages and in bytes), anything else is answered at once (errors,
  `response.steer.failed`);
- one worker task runs the queue's turns one at a time, re-authenticating the
  upgrade's headers before each (a token may expire during an hour-long connection);
- a client that leaves drops the queue and cancels the worker, so the running turn is
  abandoned (charged) and its upstream call closed, as on HTTP;
- past `max_connection_seconds` the running turn completes, then every message not
  run gets `websocket_connection_limit_reached` and the socket closes (1000); a
  connection idle for `idle_timeout_seconds` closes the same way
  (`websocket_idle_timeout`); at shutdown (SIGTERM) a connection takes no more
  messages (each gets `server_shutdown`), its running turn has the grace period
  (`service.shutdown_grace_seconds`), then the socket closes with 1001.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Mapping

from aiohttp import WSCloseCode, WSMsgType, web

from gateway.config.access import Action
from gateway.config.websocket import WebSocketConfig
from gateway.http import ws_protocol as proto
from gateway.http.client_writes import ClientWrites, client_writes
from gateway.http.services import SERVICES
from gateway.identity import Authenticator, Identity
from gateway.identity.audit import REFUSALS, log_refusal
from gateway.schema.errors import ApiError, database_error, endpoint_forbidden, internal_error, shutting_down
from gateway.storage.database import DatabaseUnavailable
from gateway.streaming.rewriter import StreamRewriter
from gateway.streaming.websocket import WebSocketFraming
from gateway.turns.in_progress import InProgress
from gateway.turns.run import FrameSink, client_left
from gateway.turns.service import TurnService
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.http")

_ROUTE = "GET /v1/responses (websocket)"
# aiohttp's hard limit on a received message: above it aiohttp closes the socket
# (1009). It sits well above the soft limit, which gets an error message instead.
_HARD_MARGIN = 1024 * 1024


def is_upgrade(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


def _too_many_sockets(user_id: str, count: int, limit: int) -> ApiError:
    return ApiError(429, "Too many WebSocket connections",
                    f"User {user_id} has {count} WebSocket connections open (limit {limit})",
                    code="websocket_connections_exceeded", headers={"Retry-After": "1"})


class OpenSockets:
    """This replica's open WebSockets: counted per user, closed at shutdown."""

    def __init__(self, per_user_limit: int) -> None:
        self.per_user = InProgress(per_user_limit, _too_many_sockets)
        self.connections: set[_Connection] = set()

    def drain(self) -> None:
        """Shutting down: every connection takes no more messages and closes once its
        running turn (if any) ended."""
        for connection in list(self.connections):
            connection.drain()

    def running(self) -> int:
        """The connections running a turn."""
        return sum(1 for connection in self.connections if connection.running)

    async def close_all(self, app: web.Application) -> None:
        await asyncio.gather(*(connection.shutdown() for connection in list(self.connections)),
                             return_exceptions=True)


OPEN_SOCKETS: web.AppKey[OpenSockets] = web.AppKey("open_websockets", OpenSockets)


def install(app: web.Application, config: WebSocketConfig) -> None:
    """The registry and its shutdown step (before the cleanup that drains turns)."""
    sockets = OpenSockets(config.max_connections_per_user)
    app[OPEN_SOCKETS] = sockets
    app.on_shutdown.append(sockets.close_all)


class _Sink(FrameSink):
    """A turn's frames to the socket: each upstream read's frames in one write, as
    WebSocket text frames the rewriter's framing made (the socket is uncompressed)."""

    def __init__(self, rewriter: StreamRewriter, writes: ClientWrites):
        super().__init__(rewriter)
        # A client that stops reading is cut past a bound (http/client_writes.py); the
        # socket stays open after a turn, so its end is a write like the others.
        self.write = writes.write   # no layer per read
        self.end = writes.write


def _origin_allowed(request: web.Request, origins: list[str]) -> bool:
    origin = request.headers.get("Origin")
    return origin is None or "*" in origins or origin in origins


async def connect(request: web.Request) -> web.StreamResponse:
    """The upgrade: refused as an HTTP error, or served until either side ends it."""
    services = request.app[SERVICES]
    service = services.config.service
    config = service.websocket
    if not config.enabled:
        raise ApiError(400, "WebSocket disabled", "This gateway does not serve /v1/responses over WebSocket.",
                       code="websocket_disabled")
    if not _origin_allowed(request, service.cors.allow_origins):
        raise ApiError(403, "Origin not allowed", f"Origin {request.headers.get('Origin')} is not allowed.",
                       code="origin_not_allowed")
    caller: Identity = request["identity"]
    sockets = request.app[OPEN_SOCKETS]
    sockets.per_user.enter(caller.user_id)
    try:
        socket = web.WebSocketResponse(compress=False, autoping=True,
                                       max_msg_size=service.max_request_body_bytes + _HARD_MARGIN)
        if not socket.can_prepare(request).ok:
            raise ApiError(400, "Bad WebSocket upgrade", "The upgrade request is not a valid WebSocket handshake.",
                           code="invalid_upgrade")
        socket.headers["X-Request-ID"] = request["request_id"]
        writer = await socket.prepare(request)
        connection = _Connection(request, socket, writer, services.turns, services.authenticator, config,
                                 service.max_request_body_bytes, service.max_json_items)
        sockets.connections.add(connection)
        try:
            await connection.serve()
        finally:
            sockets.connections.discard(connection)
    finally:
        sockets.per_user.leave(caller.user_id)
    return socket


class _Connection:
    def __init__(self, request: web.Request, socket: web.WebSocketResponse, writer: Any, turns: TurnService,
                 authenticator: Authenticator, config: WebSocketConfig, soft_limit: int, max_items: int):
        self._request = request
        self._socket = socket
        self._writer = writer
        self._turns = turns
        self._authenticator = authenticator
        self._config = config
        self._soft_limit = soft_limit
        self._max_items = max_items   # `service.max_json_items`: counted before a message is decoded
        self._headers: Mapping[str, str] = request.headers
        self._caller: Identity = request["identity"]   # the upgrade's: what arriving messages are checked for
        self._queue: deque[proto.Waiting] = deque()
        self._queued_bytes = 0
        self._gone = False                   # the client left: nothing more runs
        self._ready = asyncio.Event()        # the queue has something
        self._running = False
        self._draining = False               # the gateway is shutting down: no new turn starts
        self._continuation = proto.Continuation(config.max_context_bytes)
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + config.max_connection_seconds
        self._ended: ApiError | None = None   # why the server ends the connection
        self._worker: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        worker = self._worker = asyncio.create_task(self._work())
        try:
            async for message in self._socket:
                if message.type is WSMsgType.TEXT or message.type is WSMsgType.BINARY:
                    await self._received(message.data)
                elif message.type is WSMsgType.ERROR:
                    break
        finally:
            # Nothing that waits runs any more, whoever ended the connection.
            self._gone = True
            self._drop_queue()
            if not worker.done() and self._ended is None:
                # The client left (or the socket failed): the running turn is abandoned
                # and its upstream call closed, as when an HTTP client leaves. (When the
                # server ends the connection, the worker is completing the close handshake.)
                worker.cancel()
            try:
                await worker
            except asyncio.CancelledError:
                handler = asyncio.current_task()
                if handler is not None and handler.cancelling():
                    if not self._socket.closed:
                        raise   # the connection went away mid-session, or the gateway stops
                    # The close handshake was complete: aiohttp cancels a handler when its
                    # TCP connection goes (handler_cancellation), which a closed socket's
                    # does at once. The session ended normally: counted 101, not 499.
                    handler.uncancel()
            except Exception as exc:
                if not client_left(exc):
                    raise
                # The client left mid-turn (the runner abandoned the turn).

    def _drop_queue(self) -> None:
        self._queue.clear()
        self._queued_bytes = 0

    async def _received(self, data: str | bytes) -> None:
        try:
            parsed = proto.parse(data, self._soft_limit, self._max_items)
        except ApiError as exc:
            await self._send(proto.error_message(exc, proto.lane_of(data, self._max_items)
                                                 if len(data) <= self._soft_limit
                                                 else None))
            return
        if isinstance(parsed, proto.Steer):
            await self._send(proto.steer_refused(parsed))
            return
        if self._gone:
            return
        if self._ended is not None or self._draining:
            await self._send(proto.error_message(self._ended or shutting_down(), parsed.stream_id))
            return
        # The messages that would wait behind the running turn with this one, and their bytes.
        config = self._config
        behind = len(self._queue) + (1 if self._running else 0)
        if behind > config.max_queued_messages:
            await self._send(proto.error_message(proto.queue_full(config.max_queued_messages), parsed.stream_id))
            return
        if self._queued_bytes + parsed.size > config.max_queued_bytes:
            await self._send(proto.error_message(proto.queue_bytes_full(config.max_queued_bytes), parsed.stream_id))
            return
        # Refused now, not when its turn comes: an invalid request never waits.
        try:
            checked = await self._turns.check(self._caller, parsed.body)
        except ApiError as exc:
            self._audit(exc)
            await self._send(proto.error_message(exc, parsed.stream_id))
            return
        except Exception:   # (the backend asked which runs turns, for what only it accepts)
            log.exception("unhandled error checking a WebSocket message (request %s)", self._request["request_id"])
            await self._send(proto.error_message(internal_error(), parsed.stream_id))
            return
        if self._gone:
            return
        if self._ended is not None or self._draining:   # the server ended the connection while it was checked
            await self._send(proto.error_message(self._ended or shutting_down(), parsed.stream_id))
            return
        # Runs next with nothing before it: what was parsed and checked is kept for it;
        # one that waits behind others keeps only its text.
        direct = not self._queue and not self._running
        self._queue.append(proto.Waiting(data, parsed.stream_id, parsed.size, (parsed, checked) if direct else None))
        self._queued_bytes += parsed.size
        self._ready.set()

    def _next(self) -> proto.Waiting:
        waiting = self._queue.popleft()
        self._queued_bytes -= waiting.size
        return waiting

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._draining and not self._gone:
                await self._end(shutting_down(), WSCloseCode.GOING_AWAY)
                return
            if not self._queue:
                self._ready.clear()
                left = self._deadline - loop.time()
                wait = min(left, self._config.idle_timeout_seconds)
                try:
                    await asyncio.wait_for(self._ready.wait(), wait)
                except TimeoutError:
                    if wait >= left:
                        await self._end(proto.connection_limit(self._config.max_connection_seconds))
                    else:
                        await self._end(proto.idle_timeout(self._config.idle_timeout_seconds))
                    return
            if self._gone:
                return
            if self._draining:
                continue   # woken to end the connection (above)
            if loop.time() >= self._deadline:
                await self._end(proto.connection_limit(self._config.max_connection_seconds))
                return
            waiting = self._next()
            self._running = True
            try:
                await self._turn(waiting)
            finally:
                self._running = False

    async def _end(self, why: ApiError, code: WSCloseCode = WSCloseCode.OK) -> None:
        """The server ends the connection: every message not run hears why."""
        self._ended = why
        await self._send(proto.error_message(why))
        while self._queue:
            await self._send(proto.error_message(why, self._next().stream_id))
        await self._socket.close(code=code, message=why.code.encode())

    async def _turn(self, waiting: proto.Waiting) -> None:
        create = waiting.create()   # it held only its text while it waited
        previous = create.body.get("previous_response_id")
        try:
            caller = await self._authenticate()
            body, held = self._continuation.body(create)
            # `held`: the id the client named, echoed in responses (the body chains another).
            # The arrival's check, where it was kept for this very body (no continuation
            # context added) and this user: `prepare()` checks the rest.
            turn = await self._turns.prepare(caller, body, self._headers, shown_previous=held,
                                             checked=waiting.checked)
            await self._run(turn, create.stream_id)
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            self._audit(exc)
            await self._failed(previous, _as_ws_error(exc, previous), create.stream_id)
        except DatabaseUnavailable as exc:   # as the middleware answers it on HTTP
            log.error("database unavailable in a WebSocket turn (request %s): %s", self._request["request_id"], exc)
            await self._failed(previous, database_error(), create.stream_id)
        except Exception as exc:
            if client_left(exc):
                self._gone = True
                raise   # the client left mid-turn: the runner abandoned the turn
            log.exception("unhandled error in a WebSocket turn (request %s)", self._request["request_id"])
            await self._failed(previous, internal_error(), create.stream_id)
        else:
            result = turn.outcome.result
            if result is not None and result.get("status") == "failed":
                self._continuation.evict(previous if isinstance(previous, str) else None)
            self._continuation.record(body, result)

    async def _failed(self, previous: Any, error: ApiError, stream_id: str | None) -> None:
        """A turn refused or failed: the id it continued from is evicted (the spec's
        rule for a 4xx or 5xx continuation), and the client hears why."""
        self._continuation.evict(previous if isinstance(previous, str) else None)
        await self._send(proto.error_message(error, stream_id))

    async def _run(self, turn: Turn, stream_id: str | None) -> None:
        rewriter = StreamRewriter(self._turns.runner.enricher(turn), WebSocketFraming(stream_id))
        writes = client_writes(self._request, self._writer, self._request.app[SERVICES].config.service)
        await self._turns.run(turn, _Sink(rewriter, writes))

    async def _authenticate(self) -> Identity:
        """The upgrade's headers again, through the same module as the middleware."""
        caller = await self._authenticator.authenticate(self._headers, self._request.query)
        if Action.RESPONSES not in caller.actions:
            raise endpoint_forbidden(caller.user_id)
        return caller

    def _audit(self, error: ApiError) -> None:
        """A refusal is audited as the middleware audits one on HTTP (authentication,
        the route's action, and the turn's own: `model_override`, another user's
        conversation)."""
        if error.status in REFUSALS:
            log_refusal(_ROUTE, self._request.remote, self._request["request_id"],
                        self._request.app[SERVICES].config.authentication.module, error)

    async def _send(self, payload: bytes) -> None:
        if self._socket.closed:
            return
        try:
            await self._socket.send_str(payload.decode())
        except Exception as exc:
            if not client_left(exc):
                raise
            # The client is gone: the reader sees it and ends the connection.

    @property
    def running(self) -> bool:
        return self._running

    def drain(self) -> None:
        """The gateway is shutting down: messages that arrive from now on, and those
        queued, get `server_shutdown`; the running turn goes on (its grace period),
        then the socket closes with 1001."""
        self._draining = True
        self._ready.set()   # a worker waiting for a message ends the connection now

    async def shutdown(self) -> None:
        """The gateway stops (after the grace period): the running turn is abandoned
        (charged as when a client leaves), then the socket closes with 1001."""
        self._ended = shutting_down()
        if self._worker is not None:
            self._worker.cancel()
        await self._socket.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")


def _as_ws_error(exc: ApiError, previous: Any) -> ApiError:
    """The turn store's 404 for an unknown `previous_response_id` is the spec's code."""
    if exc.status == 404 and exc.param == "previous_response_id" and isinstance(previous, str):
        return proto.previous_not_found(previous)
    return exc
