"""THE runner: one function takes every prepared turn from its backend to wherever its
answer goes, settling it before the terminal event or body and finishing it after,
for every caller. The callers only provide a sink:

- a `BodySink` (the JSON handler): the backend's finished response object, repaired
  and enriched, never passing through the `StreamRewriter`;
- a `FrameSink` (the SSE writer: the client's socket; background runs: the event
  log and its followers): per upstream read, the `StreamRewriter` turns what the
  backend yielded into client frames, handed to `write` once (docs/architecture.md,
  decision 2: one client write per upstream read).
  Nothing is written before the first frames: an upstream that refuses the request as
  its stream's first event gets the HTTP error its refusal names instead (raised
  before `start`).

The terminal event or body waits for `Settler.settle()`, which commits the turn's
record and charge, so its `available_quotas` is the balance after the turn (a record
that cannot be committed ends the stream with `response.failed`, or the JSON request
with the database error). A turn whose caller goes away (`client_left()`: cancelled,
or its connection reset, lost or closed under a write) is abandoned: `finish()`
charges it in full.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from gateway.redaction import Redactor
from gateway.request_scope import TURN_DEADLINE
from gateway.schema.errors import ApiError, upstream_bad_stream
from gateway.schema.json_types import JsonObject
from gateway.streaming.enrich import Enricher
from gateway.streaming.events import Event
from gateway.streaming.repair import failed_response, repair_response
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.hooks import Hooks
from gateway.turns.settle import Settler
from gateway.turns.turn import Turn
from gateway.upstream.errors import upstream_error
from gateway.upstream.responses_api import StreamBroken

log = logging.getLogger("gateway.turns")


class BodySink:
    """Where a JSON turn's answer goes."""

    async def body(self, response: JsonObject) -> None:
        """The finished, settled and enriched response object."""
        raise NotImplementedError

    def keep(self, response: JsonObject) -> bool:
        """Whether the finished turn is recorded (False: the caller answers it as an
        error, as `/v1/query` does a stopped turn; it is still charged)."""
        return True

    async def stopped(self, turn: Turn, exc: BaseException) -> None:
        """The turn ended without an answer (the exception propagates after this)."""


class FrameSink:
    """Where a streamed turn's frames go, through its rewriter."""

    def __init__(self, rewriter: StreamRewriter):
        self.rewriter = rewriter

    async def start(self) -> None:
        """Before the first frames (an HTTP stream sends its headers with them)."""

    # Attributes a sink defines as methods or sets to its socket's own writes (no layer
    # per read): `write`, the frames of one upstream read; `end`, the last frames (the
    # settled terminal event, then `data: [DONE]`).
    write: Callable[[bytes], Awaitable[None]]
    end: Callable[[bytes], Awaitable[None]]

    async def stopped(self, turn: Turn, exc: BaseException) -> None:
        """The stream stopped before its end (the exception propagates after this)."""


# What the event loops and aiohttp say, as a RuntimeError, on a write to a connection
# the client closed (uvloop: "unable to perform operation on <TCPTransport closed=True
# ...>; the handler is closed"; asyncio: "Transport is closing"; aiohttp's WebSocket:
# "WebSocket connection is closed.").
_CLOSED_TRANSPORT = ("handler is closed", "transport is closing", "closing transport", "connection is closed")


def client_left(exc: BaseException) -> bool:
    """Whether `exc` means the turn's caller went away: its task cancelled, or its
    connection reset, lost or closed under a write (aiohttp's `drain()` raises a plain
    `ConnectionError` when a client that stopped reading closes, its writers
    `ClientConnectionResetError`, a closed transport a `RuntimeError`). The one
    definition: the runner abandons such a turn (charged in full), and every transport
    (SSE, the WebSocket, the query API, the middleware's 499) asks this, so no way of
    leaving is charged as a turn that merely ended."""
    if isinstance(exc, (asyncio.CancelledError, ConnectionError)):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(closed in text for closed in _CLOSED_TRANSPORT)


class Runner:
    def __init__(self, settler: Settler, labels: frozenset[str], redactor: Redactor, hooks: Hooks | None = None):
        self._settler = settler
        self.hooks = hooks or Hooks()
        self._labels = labels   # the operator's MCP server labels: their echo is scrubbed
        self._redactor = redactor  # what the gateway sent upstream, out of relayed errors
        self.deadline = 0.0        # `llama_stack.turn_deadline_seconds` (0: none), set by the wiring

    def enricher(self, turn: Turn) -> Enricher:
        """What every response object of this turn gets (JSON body or stream events)."""
        plan = turn.plan
        return Enricher(plan.shown_conversation, plan.previous_response_id, plan.display_model, self._labels,
                        plan.background, self._redactor, plan.server_prompt)

    def rewriter(self, turn: Turn) -> StreamRewriter:
        return StreamRewriter(self.enricher(turn))

    async def run(self, turn: Turn, sink: BodySink | FrameSink) -> None:
        """Run the turn to its sink: respond or stream, settle, finish."""
        error: BaseException | None = None
        # Its upstream calls end when the turn's deadline passes (none: nothing set, no cost).
        deadline = TURN_DEADLINE.set(asyncio.get_running_loop().time() + self.deadline) if self.deadline else None
        try:
            if isinstance(sink, FrameSink):
                await self._stream(turn, sink)
            else:
                await self._respond(turn, sink)
        except BaseException as exc:
            error = exc
            if client_left(exc):
                self._settler.abandon(turn)  # the client left before the answer
            elif getattr(exc, "upstream_received", False):
                self._settler.unreported(turn)  # the upstream had it, then it was lost: charged as stopped
            await sink.stopped(turn, exc)
            raise
        finally:
            if turn.in_progress is not None:
                turn.in_progress.leave(turn.plan.identity.user_id)
                turn.in_progress = None
            self._settler.finish(turn)
            self.hooks.finished(turn, error)
            if deadline is not None:
                TURN_DEADLINE.reset(deadline)

    async def _respond(self, turn: Turn, sink: BodySink) -> None:
        result = repair_response(await turn.plan.backend.respond(turn))
        self.hooks.first_event(turn)
        quotas = await self.settle(turn, result, sink.keep(result))
        self.enricher(turn).finish(result, quotas)
        await sink.body(result)

    async def _stream(self, turn: Turn, sink: FrameSink) -> None:
        rewriter = sink.rewriter

        async def ending(frames: bytes, terminal: Event | None) -> bytes:
            if terminal is None:
                return frames
            if rewriter.malformed is not None:
                self._settler.unreported(turn)  # it had the turn; what it used is lost with the stream
            try:
                quotas = await self.settle(turn, terminal.data["response"])
            except ApiError as exc:
                # Not recorded, so not done: the stream fails instead (decision 6).
                terminal, quotas = Event.build({"type": "response.failed", "sequence_number": 0,
                                               "response": failed_response(turn.outcome.result, exc.cause)}), {}
            return frames + rewriter.terminal(terminal, quotas)

        # speed: the relay loop is written here, not in a method of its own: a held stream
        # keeps one frame fewer and each read resumes one fewer (~250 instructions a read;
        # bench/README.md "The hot path's tricks"). Plain version: this `try` as a method
        # `_relay(turn, sink, rewriter, ending)`, awaited here.
        started = False
        backend = turn.plan.backend
        try:
            async with backend.open(turn) as chunks:
                # Once, not per read of a paced stream.
                feed = backend.feed(rewriter)
                try:
                    async for chunk in chunks:
                        frames, terminal = feed(chunk)
                        if not started:
                            _refuse_before_the_first_byte(rewriter, turn)
                            self.hooks.first_event(turn)
                            await sink.start()
                            started = True
                        if terminal is not None:
                            # The last frames and the end of the stream in one write.
                            await sink.end(await ending(frames, terminal))
                            return
                        if frames:
                            await sink.write(frames)
                    frames, terminal = rewriter.close()
                    # Ended without its terminal event (cut): the `response.failed` made for
                    # it is charged like a broken stream's, unless the upstream reported usage.
                    if terminal is not None and terminal.data.get("type") == "response.failed" \
                            and not terminal.data["response"].get("usage"):
                        self._settler.unreported(turn)
                except StreamBroken as exc:
                    log.warning("upstream stream for %s broke: %s", turn.plan.conversation, exc)
                    self._settler.unreported(turn)
                    frames, terminal = b"", rewriter.fail(str(exc))
                if not started:
                    await sink.start()
                await sink.end(await ending(frames, terminal))
        finally:
            turn.events = rewriter.numbered
            self.hooks.streamed(turn, turn.events)

    async def settle(self, turn: Turn, result: JsonObject | None = None, recorded: bool = True,
                     abandoned: bool | None = None) -> dict[str, int]:
        """Charge and record the turn (once) as it ended (`Settler.settle`), before its
        terminal event or body; also for a turn whose sink ends it itself (a cancelled
        background run)."""
        quotas = await self._settler.settle(turn, result, recorded, abandoned)
        if not turn.observed_settled:
            turn.observed_settled = True
            if turn.plan.added_items:
                self._settler.give_back(turn)   # before its client is told it failed
            self.hooks.settled(turn)
        return quotas


def _refuse_before_the_first_byte(rewriter: StreamRewriter, turn: Turn) -> None:
    refusal = rewriter.repairer.refusal
    if refusal is not None:
        if rewriter.malformed is not None:  # not the upstream's refusal: it sent what cannot be read
            raise upstream_bad_stream(rewriter.malformed)
        raise upstream_error(refusal[0], rewriter.enricher.redactor.text(refusal[1]), turn.plan.model.id)
