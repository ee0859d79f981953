"""The SSE writer: relays a turn's stream to the client.

Per upstream read, the `StreamRewriter` turns what the backend yielded (the upstream's
bytes, or the local engine's events) into client frames, written with one `write()`
(DESIGN decision 2). The terminal event waits for `pipeline.settle()`, which commits
the turn's record and charge, so its `available_quotas` is the balance after the turn
(a record that cannot be committed ends the stream with `response.failed`). Errors
after the first byte become `response.failed` then `data: [DONE]` (decision 6); an
upstream that refuses the request as its stream's first event, before the gateway has
sent anything, gets the HTTP error its refusal names instead. A client that goes away
cancels the handler, which closes the upstream connection.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from gateway.pipeline import Pipeline, Turn
from gateway.schema.errors import ApiError
from gateway.streaming.events import Event
from gateway.streaming.repair import failed_response
from gateway.streaming.rewriter import StreamRewriter
from gateway.upstream.errors import upstream_error
from gateway.upstream.responses import StreamBroken

log = logging.getLogger("gateway.http")

class _EventStream(web.StreamResponse):
    # Headers go out with the first events (aiohttp's own `Response` does the same)
    # instead of in a write of their own: one syscall less per stream.
    _send_headers_immediately = False


SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}


async def relay(request: web.Request, pipeline: Pipeline, turn: Turn) -> web.StreamResponse:
    rewriter = StreamRewriter(pipeline.enricher(turn))
    response = _EventStream(headers={**SSE_HEADERS, "X-Request-ID": request["request_id"]})

    async def ending(frames: bytes, terminal: Event | None) -> bytes:
        if terminal is None:
            return frames
        turn.result = terminal.data["response"]
        try:
            quotas = await pipeline.settle(turn)
        except ApiError as exc:
            # Not recorded, so not done: the stream fails instead (decision 6).
            terminal, quotas = Event.build({"type": "response.failed", "sequence_number": 0,
                                           "response": failed_response(turn.result, exc.cause)}), {}
        return frames + rewriter.terminal(terminal, quotas)

    try:
        async with pipeline.backend_of(turn).open(turn) as chunks:
            if not turn.engine:  # the engine reads it at its first step, then drops it
                turn.body = {}  # sent: nothing needs it while the stream is open
            # Once, not per read of a paced stream. The forward backend yields the
            # upstream's bytes (the rewriter's fast path), the engine lists of events.
            feed = rewriter.feed_events if turn.engine else rewriter.feed
            write = response.write
            try:
                async for chunk in chunks:
                    frames, terminal = feed(chunk)
                    if not response.prepared:
                        # Nothing is sent before the first frames: an upstream that refused
                        # the request inside its stream still gets its HTTP status.
                        _refuse_before_the_first_byte(rewriter, turn)
                        await response.prepare(request)
                    if terminal is not None:
                        # The last frames and the end of the chunked body in one write.
                        await response.write_eof(await ending(frames, terminal))
                        return response
                    if frames:
                        await write(frames)
                frames, terminal = rewriter.close()
            except StreamBroken as exc:
                log.warning("upstream stream for %s broke: %s", turn.conversation, exc)
                frames, terminal = b"", rewriter.fail(str(exc))
            if not response.prepared:
                await response.prepare(request)
            await response.write_eof(await ending(frames, terminal))
            return response
    except ConnectionResetError:
        # The client went away before the handler was cancelled; leaving the `async
        # with` above already closed the upstream connection.
        log.info("client went away during the stream of %s", turn.conversation)
        turn.abandoned = True
        return response
    except asyncio.CancelledError:
        turn.abandoned = True  # the client left (aiohttp cancels the handler)
        raise
    finally:
        pipeline.finish(turn)


def _refuse_before_the_first_byte(rewriter: StreamRewriter, turn: Turn) -> None:
    refusal = rewriter.repairer.refusal
    if refusal is not None:
        raise upstream_error(refusal[0], refusal[1], turn.model.id)
