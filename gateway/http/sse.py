"""The SSE writer: relays a turn's stream to the client.

Per upstream read: repair and enrich the events it completed, number them, and write
them with one `write()` (DESIGN decision 2). The terminal event waits for
`pipeline.settle()` so its `available_quotas` is the balance after the turn. Errors
after the first byte become `response.failed` then `data: [DONE]` (decision 6); a
client that goes away cancels the handler, which closes the upstream connection.
"""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.pipeline import Pipeline, Turn
from gateway.streaming.enrich import Enricher
from gateway.streaming.events import TERMINAL_EVENTS, Event
from gateway.streaming.repair import StreamRepairer
from gateway.streaming.sse import DONE_FRAME, Framer
from gateway.upstream.responses import StreamBroken

log = logging.getLogger("gateway.http")

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
               "X-Accel-Buffering": "no"}


class _Writer:
    def __init__(self, pipeline: Pipeline, turn: Turn):
        self.pipeline = pipeline
        self.turn = turn
        self.repairer = StreamRepairer()
        self.enricher = Enricher(turn.conversation, turn.request.previous_response_id)
        self.framer = Framer()

    async def frames(self, events: list[Event]) -> bytes:
        out = []
        for event in events:
            for fixed in self.repairer.feed(event):
                out.append(await self.frame(fixed))
        return b"".join(out)

    async def frame(self, event: Event) -> bytes:
        if event.type in TERMINAL_EVENTS:
            self.turn.result = event.data["response"]
            self.enricher.terminal(event, await self.pipeline.settle(self.turn))
        else:
            self.enricher.apply(event)
        return self.framer.frame(event)

    async def ending(self, events: list[Event]) -> bytes:
        return b"".join([await self.frame(event) for event in events]) + DONE_FRAME


async def relay(request: web.Request, pipeline: Pipeline, turn: Turn) -> web.StreamResponse:
    writer = _Writer(pipeline, turn)
    response = web.StreamResponse(headers={**SSE_HEADERS, "X-Request-ID": request["request_id"]})
    try:
        async with pipeline.backend.stream(turn.body, turn.headers, turn.model.id) as batches:
            await response.prepare(request)
            try:
                async for events in batches:
                    chunk = await writer.frames(events)
                    if chunk:
                        await response.write(chunk)
                    if writer.repairer.terminal is not None:
                        break
                tail = writer.repairer.close()
            except StreamBroken as exc:
                log.warning("upstream stream for %s broke: %s", turn.conversation, exc)
                tail = writer.repairer.fail(str(exc))
            await response.write(await writer.ending(tail))
            return response
    except ConnectionResetError:
        # The client went away before the handler was cancelled; leaving the `async
        # with` above already closed the upstream connection.
        log.info("client went away during the stream of %s", turn.conversation)
        return response
    finally:
        pipeline.finish(turn)
