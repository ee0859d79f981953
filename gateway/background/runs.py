"""Background responses (`background: true`): the gateway runs the turn itself, detached
from the client, through the same runner as any turn (`turns/run.py`: the backend's
stream, the rewriter, settled before the terminal event) with the event log as its
sink, and records the stream's frames so anyone may follow or resume it.

A `Run` is one response this process runs. Its frames are kept in memory while it runs
(followers in this process are woken at once, without the database) and written to
`gateway_background_events` by a flusher task a batch at a time: at most one write in
flight, then `FLUSH_LINGER` before the next, so a paced stream costs one row write per
200 ms rather than one per event, and a stream's events never wait for the database.
The terminal frames and the final object are written in one transaction after the
turn is settled and before any follower sees the terminal event.

Cancel (`cancel()`) cancels the run's task: the backend's stream is closed (the
upstream request, or the engine's loop and its running tools, cancelled), and the
response ends `cancelled`: a `response.incomplete` event whose `response.status` is
`cancelled`, with the output so far (see `cancelled_event`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from gateway.schema.errors import ApiError, internal_error
from gateway.schema.json_types import JsonObject, ResponseUsage
from gateway.storage.background_responses import BackgroundStore
from gateway.streaming.events import Event
from gateway.streaming.progress import progress
from gateway.streaming.sse import DONE_FRAME
from gateway.turns.run import FrameSink, Runner
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.background")
FLUSH_LINGER = 0.2   # as often as followers on other replicas poll (http/background.py)


def first_response(frames: bytes) -> dict[str, Any]:
    """The response object of the first frame (`response.created`)."""
    end = frames.find(b"\n\n")
    frame = frames if end < 0 else frames[:end]
    response: dict[str, Any] = orjson.loads(frame[frame.index(b"data: ") + 6:])["response"]
    return response


def last_response(frames: bytes) -> JsonObject:
    """The response object of the last frame (the terminal event)."""
    frame = frames.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    response: dict[str, Any] = orjson.loads(frame[frame.index(b"data: ") + 6:])["response"]
    return response


def cancelled_event(response: dict[str, Any], batches: list[bytes], usage: ResponseUsage | None = None) -> Event:
    """How a cancelled response ends its stream, within the `openai` types (which have no
    `response.cancelled` event): `response.incomplete`, the event of a response that
    stopped before it was done, whose `response` has `status: cancelled` (as GET and the
    cancel endpoint show it), the output so far and the usage so far (the engine's finished
    rounds, when it reported any), and no `error`: nothing failed."""
    final = progress(response, batches)
    final.update(status="cancelled", error=None, incomplete_details=None)
    if usage is not None:
        final["usage"] = usage
    return Event.build({"type": "response.incomplete", "sequence_number": 0, "response": final})


def interrupted_event(response: dict[str, Any], batches: list[bytes], message: str | None = None) -> Event:
    """How a response the gateway stopped running ends (a shutdown, a runner that was
    lost: see `BackgroundWatch`, or a fault of ours): `response.failed` with the output
    so far."""
    final = progress(response, batches)
    final.update(status="failed", incomplete_details=None, error={"code": "server_error",
                                                                  "message": message or INTERRUPTED})
    return Event.build({"type": "response.failed", "sequence_number": 0, "response": final})


INTERRUPTED = "The gateway stopped before this background response was done; create it again."
UNEXPECTED = "An unexpected error occurred while processing the request."


class Run:
    """One background response this process runs, and its recorded frames."""

    def __init__(self, turn: Turn, store: BackgroundStore, runner: str):
        self.turn = turn
        self.id: str | None = None
        self.response: dict[str, Any] | None = None   # as `response.created` showed it
        self.batches: list[tuple[int, bytes]] = []     # (first sequence number, frames), in memory
        self.next_seq = 0
        self.done = False
        self.ending = False
        self.stopping: str | None = None   # why it ends failed (a shutdown, a fault), not cancelled
        self.opened: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[Any] | None = None
        self._store = store
        self._runner = runner
        self._changed = asyncio.Event()
        self._pending: list[bytes] = []
        self._pending_first = 0
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._flusher: asyncio.Task[Any] | None = None

    async def changed(self) -> None:
        """Wait for more frames (or the end)."""
        await self._changed.wait()

    def _publish(self, frames: bytes, count: int) -> None:
        self.batches.append((self.next_seq, frames))
        self.next_seq += count
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def record(self, frames: bytes, count: int) -> None:
        """A read's frames: created with the first ones (committed before the creator
        is answered), then queued for the flusher."""
        if not count:
            return
        if self.id is None:
            self.response = first_response(frames)
            self.id = self.response["id"]
            await self._store.create(self.response, self.turn.plan.identity.user_id, self._runner, frames, count)
            self._publish(frames, count)
            self._flusher = asyncio.ensure_future(self._flush_loop())
            self.opened.set_result(self.response)
            return
        if not self._pending:
            self._pending_first = self.next_seq
        self._pending.append(frames)
        self._publish(frames, count)
        self._wake.set()

    async def _flush_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            async with self._lock:
                await self._flush()
            await asyncio.sleep(FLUSH_LINGER)

    async def _flush(self) -> None:
        if not self._pending:
            return
        frames, first, count = b"".join(self._pending), self._pending_first, self.next_seq - self._pending_first
        self._pending = []
        try:
            await self._store.append(self.id or "", first, frames, count)
        except Exception as exc:  # followers here still have them; the end is written with the rest
            log.error("recording events of %s failed: %s", self.id, exc)

    async def end(self, frames: bytes, count: int) -> None:
        """The terminal frames (settled): written with what is pending and the final
        object, in one transaction, then shown to followers."""
        if self.id is None:  # a stream that ended at once: its creation too
            await self.record(frames, count)
            frames, count = b"", 0
            final = last_response(self.batches[-1][1])
        else:
            final = last_response(frames)
        async with self._lock:
            if self._flusher is not None:
                self._flusher.cancel()
            first = self._pending_first if self._pending else self.next_seq
            pending, self._pending = b"".join(self._pending) + frames, []
            total = self.next_seq - first + count
            if not await self._store.finish(final, first, pending, total):
                log.info("background response %s had already ended elsewhere", self.id)
        if count:
            self._publish(frames, count)

    def finished(self) -> None:
        self.done = True
        if self._flusher is not None:
            self._flusher.cancel()
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


class _EventLog(FrameSink):
    """A background run's sink: its recorded frames, and how it ends when stopped."""

    def __init__(self, run: Run, runner: Runner):
        super().__init__(runner.rewriter(run.turn))
        self._run = run
        self._runner = runner

    async def write(self, frames: bytes) -> None:
        await self._run.record(frames, self.rewriter.numbered - self._run.next_seq)

    async def end(self, frames: bytes) -> None:
        run = self._run
        run.ending = True
        if frames.endswith(DONE_FRAME):
            frames = frames[:-len(DONE_FRAME)]
        await asyncio.shield(run.end(frames, self.rewriter.numbered - run.next_seq))

    async def stopped(self, turn: Turn, exc: BaseException) -> None:
        run = self._run
        if isinstance(exc, asyncio.CancelledError):
            if not run.opened.done():  # stopped before it existed (a shutdown): its creator is told
                run.opened.set_exception(internal_error())
            elif not run.ending:
                await asyncio.shield(self._cancelled())
        elif not run.opened.done():  # refused before it existed: its creator gets the error
            run.opened.set_exception(exc)
            if not isinstance(exc, ApiError):
                log.exception("background response failed before it started")
        elif not run.ending:
            log.exception("background response %s failed", run.id)
            run.stopping = UNEXPECTED
            try:
                await asyncio.shield(self._cancelled())
            except Exception:  # the database is gone too: the next start-up fails it
                log.exception("ending background response %s failed", run.id)
        else:
            log.exception("background response %s failed while ending", run.id)

    async def _cancelled(self) -> None:
        run = self._run
        run.ending = True
        assert run.response is not None
        batches = [frames for _, frames in run.batches]
        event = interrupted_event(run.response, batches, run.stopping) if run.stopping \
            else cancelled_event(run.response, batches, run.turn.usage)
        try:
            # Cancelled by its client: charged like an abandoned stream (not a fault of ours).
            quotas = await self._runner.settle(run.turn, event.data["response"], abandoned=not run.stopping)
        except ApiError:
            quotas = {}
        await self.end(self.rewriter.terminal(event, quotas))


class BackgroundRuns:
    """The background responses this process runs, by response id."""

    def __init__(self, runner: Runner, store: BackgroundStore, runner_id: str):
        self._runner = runner
        self.store = store
        self.runner = runner_id
        self._runs: dict[str, Run] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def get(self, response_id: str) -> Run | None:
        return self._runs.get(response_id)

    @property
    def running(self) -> bool:
        return bool(self._runs)

    def count(self) -> int:
        """The runs of this process not yet ended (`gateway_background_responses_running`)."""
        return len(self._tasks)

    async def start(self, turn: Turn) -> Run:
        """Start the turn detached; return once its response exists (recorded), or raise
        the error the backend refused it with before that (nothing recorded then)."""
        run = Run(turn, self.store, self.runner)
        run.task = asyncio.ensure_future(self._run(run))
        self._tasks.add(run.task)
        run.task.add_done_callback(self._tasks.discard)
        await asyncio.shield(run.opened)
        assert run.id is not None
        if not run.done:  # (a run that already ended has left the table, or never entered it)
            self._runs[run.id] = run
        return run

    async def _run(self, run: Run) -> None:
        try:
            await self._runner.run(run.turn, _EventLog(run, self._runner))
        except (Exception, asyncio.CancelledError):
            pass  # its sink ended it as it should end (and logged what was not expected)
        finally:
            run.finished()
            if run.id is not None:
                self._runs.pop(run.id, None)

    async def cancel(self, run: Run) -> None:
        """Stop the run (unless it is already ending) and wait until it has ended."""
        assert run.task is not None
        if not run.ending:
            run.task.cancel()
        await asyncio.wait({run.task})

    async def close(self) -> None:
        """At shutdown: the runs still going are stopped and recorded as failed (what a
        start-up does to those a crash left behind)."""
        for run in list(self._runs.values()):
            run.stopping = INTERRUPTED
            await self.cancel(run)
