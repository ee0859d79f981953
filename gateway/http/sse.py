"""The SSE writer: relays a turn's stream to the client's socket (`turn_stream.pump`
does the work: rewriting, settling before the terminal event). Errors after the first
byte become `response.failed` then `data: [DONE]` (decision 6); an upstream that
refuses the request before the gateway has sent anything gets the HTTP error its
refusal names instead. A client that goes away cancels the handler, which closes the
upstream connection.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from gateway.pipeline import Pipeline, Turn
from gateway.streaming.rewriter import StreamRewriter
from gateway.turn_stream import pump

log = logging.getLogger("gateway.http")


class _EventStream(web.StreamResponse):
    # Headers go out with the first events (aiohttp's own `Response` does the same)
    # instead of in a write of their own: one syscall less per stream.
    _send_headers_immediately = False


SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}


async def relay(request: web.Request, pipeline: Pipeline, turn: Turn) -> web.StreamResponse:
    response = _EventStream(headers={**SSE_HEADERS, "X-Request-ID": request["request_id"]})
    try:
        await pump(pipeline, turn, StreamRewriter(pipeline.enricher(turn)), lambda: response.prepare(request),
                   response.write, response.write_eof)
        return response
    except ConnectionResetError:
        # The client went away before the handler was cancelled; leaving the backend's
        # `async with` already closed the upstream connection.
        log.info("client went away during the stream of %s", turn.conversation)
        turn.abandoned = True
        return response
    except asyncio.CancelledError:
        turn.abandoned = True  # the client left (aiohttp cancels the handler)
        raise
    finally:
        pipeline.finish(turn)
