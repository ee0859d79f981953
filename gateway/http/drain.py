"""Graceful drain on SIGTERM (or SIGINT): what a rolling restart needs so no user loses
a turn (docs/resilience.md).

`http/server.py` calls `Drain.run()` once the signal came and the listener is closed
(new connections are refused), before aiohttp's own shutdown:

1. `/readiness` answers 503 from now on (`active`), so a load balancer that still
   holds a connection stops sending;
2. every open connection is served its next request and then closed (an idle
   keep-alive connection is not dropped under a request already on its way);
   WebSocket connections take no more messages (`server_shutdown`) and close with
   1001 once their running turn ended;
3. running requests (streams, JSON turns, WebSocket turns, background runs) get
   `service.shutdown_grace_seconds` to finish;
4. then every upstream exchange still in progress is interrupted: a stream ends with
   `response.failed` (LCORE's `error` event on the query API), settled, charged and
   recorded like any failed turn; a JSON turn gets the shutdown's 503.

What is left after a few more seconds is cancelled by aiohttp's shutdown (abandoned,
charged), then the application's cleanup flushes the turn writer and closes the
database, and the process exits 0. A second signal ends the grace at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.web_server import Server

from gateway.http.services import SERVICES
from gateway.http.websocket import OPEN_SOCKETS

log = logging.getLogger("gateway")

# How often the drain looks whether anything still runs (shutdown only: never a request's cost).
_POLL_S = 0.05
# After the grace: how long interrupted turns get to write their failure and settle.
AFTER_GRACE_S = 5.0


class Drain:
    def __init__(self, grace: float):
        self.grace = grace
        self.active = False
        self._hurry = asyncio.Event()   # a second signal: no more grace

    def hurry(self) -> None:
        self._hurry.set()

    async def run(self, app: web.Application, server: Server | None) -> None:
        """From the signal to the end of the grace period (see the module's docstring)."""
        self.active = True
        connections = server.connections if server is not None else []
        for connection in connections:
            # Closed once its next response is sent (aiohttp's `close()` would drop an idle
            # connection now, under a request that may be on its way): only now, so no
            # request pays for it before.
            handler: Any = connection
            if handler._request_handler is not None:
                handler._request_handler = _closing(handler._request_handler)
        sockets = app.get(OPEN_SOCKETS)
        if sockets is not None:
            sockets.drain()
        started = time.monotonic()
        running = self.running(app, server)
        log.info("shutting down: readiness is 503, new connections are refused; %d request(s) running get "
                 "up to %g s (service.shutdown_grace_seconds)", running, self.grace)
        if running and not await self._until_idle(app, server, self.grace):
            services = app.get(SERVICES)
            interrupted = services.upstream.interrupt() if services is not None else 0
            log.warning("shutting down: the grace period is over; %d request(s) still running, %d upstream "
                        "call(s) interrupted: their turns end as failed", self.running(app, server), interrupted)
            await self._until_idle(app, server, AFTER_GRACE_S, hurried=False)
        log.info("shutting down: drained in %.1f s", time.monotonic() - started)

    async def _until_idle(self, app: web.Application, server: Server | None, seconds: float,
                          hurried: bool = True) -> bool:
        """Wait until nothing runs (True), or `seconds` passed or a second signal came."""
        deadline = time.monotonic() + seconds
        while self.running(app, server):
            if time.monotonic() >= deadline or (hurried and self._hurry.is_set()):
                return False
            await asyncio.sleep(_POLL_S)
        return True

    @staticmethod
    def running(app: web.Application, server: Server | None) -> int:
        """HTTP requests being answered (a WebSocket counts while it runs a turn) and
        background runs."""
        count = 0
        for connection in server.connections if server is not None else ():
            handler: Any = connection
            if handler._request_in_progress and not handler._upgraded:
                count += 1
        sockets = app.get(OPEN_SOCKETS)
        if sockets is not None:
            count += sockets.running()
        services = app.get(SERVICES)
        if services is not None:
            count += services.background.count()
        return count


def _closing(handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]) -> Any:
    """`handler`, its response sent with `Connection: close` (a stream already started:
    the connection closes after it)."""
    async def closing(request: web.BaseRequest) -> web.StreamResponse:
        response = await handler(request)
        response.force_close()
        return response
    return closing


DRAIN: web.AppKey[Drain] = web.AppKey("drain", Drain)
