"""The SSE writer: a turn's stream to the client's socket, as a sink of the turn
runner (`turns/run.py` does the work: rewriting, settling before the terminal event).
Errors after the first byte become `response.failed` then `data: [DONE]` (decision
6); an upstream that refuses the request before the gateway has sent anything gets the
HTTP error its refusal names instead. A client that goes away cancels the handler, or
fails a write (`client_left()`), which closes the upstream connection.
"""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.http.client_writes import client_writes
from gateway.http.services import SERVICES
from gateway.turns.run import FrameSink, client_left
from gateway.turns.service import TurnService
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.http")


class _EventStream(web.StreamResponse):
    # Headers go out with the first events (aiohttp's own `Response` does the same)
    # instead of in a write of their own: one syscall less per stream.
    _send_headers_immediately = False


SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}


class _Socket(FrameSink):
    def __init__(self, turns: TurnService, turn: Turn, request: web.Request):
        super().__init__(turns.runner.rewriter(turn))
        self._request = request
        self.response = _EventStream(headers={**SSE_HEADERS, "X-Request-ID": request["request_id"]})

    async def start(self) -> None:
        writer = await self.response.prepare(self._request)
        # A client that stops reading is cut past a bound (http/client_writes.py).
        writes = client_writes(self._request, writer, self._request.app[SERVICES].config.service)
        self.write = writes.write   # no layer per read

        async def end(frames: bytes) -> None:
            await writes.eof(frames, self.response.write_eof)
        self.end = end


async def relay(request: web.Request, turns: TurnService, turn: Turn) -> web.StreamResponse:
    sink = _Socket(turns, turn, request)
    try:
        await turns.run(turn, sink)
    except Exception as exc:
        if not client_left(exc):
            raise
        # The client went away before the handler was cancelled (the runner marked the
        # turn abandoned); leaving the backend's `async with` closed the upstream.
        log.info("client went away during the stream of %s", turn.plan.conversation)
    return sink.response
