"""A turn's stream, from its backend to wherever its frames go: the one loop that both
the SSE writer (`http/sse.py`: the client's socket) and background responses
(`background/`: the event log and its followers) run.

Per upstream read, the `StreamRewriter` turns what the backend yielded (the upstream's
bytes, or the local engine's events) into client frames, handed to `write` once
(DESIGN decision 2). The terminal event waits for `pipeline.settle()`, which commits
the turn's record and charge, so its `available_quotas` is the balance after the turn
(a record that cannot be committed ends the stream with `response.failed`). Nothing is
written before the first frames: an upstream that refuses the request as its stream's
first event gets the HTTP error its refusal names instead (raised before `start`).
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from gateway.pipeline import Pipeline, Turn
from gateway.schema.errors import ApiError
from gateway.streaming.events import Event
from gateway.streaming.repair import failed_response
from gateway.streaming.rewriter import StreamRewriter
from gateway.upstream.errors import upstream_error
from gateway.upstream.responses import StreamBroken

log = logging.getLogger("gateway.http")

Write = Callable[[bytes], Awaitable[None]]


async def pump(pipeline: Pipeline, turn: Turn, rewriter: StreamRewriter, start: Callable[[], Awaitable[object]],
               write: Write, write_eof: Write) -> None:
    """Run the turn's stream: `start()` before the first frames, `write(frames)` per
    read, `write_eof(last frames)` with the settled terminal event and `data: [DONE]`."""

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

    started = False
    async with pipeline.backend_of(turn).open(turn) as chunks:
        if not turn.engine:  # the engine reads it at its first step, then drops it
            turn.body = {}  # sent: nothing needs it while the stream is open
        # Once, not per read of a paced stream. The forward backend yields the
        # upstream's bytes (the rewriter's fast path), the engine lists of events.
        feed = rewriter.feed_events if turn.engine else rewriter.feed
        try:
            async for chunk in chunks:
                frames, terminal = feed(chunk)
                if not started:
                    _refuse_before_the_first_byte(rewriter, turn)
                    await start()
                    started = True
                if terminal is not None:
                    # The last frames and the end of the stream in one write.
                    await write_eof(await ending(frames, terminal))
                    return
                if frames:
                    await write(frames)
            frames, terminal = rewriter.close()
        except StreamBroken as exc:
            log.warning("upstream stream for %s broke: %s", turn.conversation, exc)
            frames, terminal = b"", rewriter.fail(str(exc))
        if not started:
            await start()
        await write_eof(await ending(frames, terminal))


def _refuse_before_the_first_byte(rewriter: StreamRewriter, turn: Turn) -> None:
    refusal = rewriter.repairer.refusal
    if refusal is not None:
        raise upstream_error(refusal[0], rewriter.enricher.redactor.text(refusal[1]), turn.model.id)
