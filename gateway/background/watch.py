"""What happens to background responses around the processes that run them.

- **Start-up** (`fail_stale`): a response left `in_progress` by a gateway that stopped
  (a crash; a clean shutdown records its own as failed) is marked `failed` with an
  error saying so, its output so far kept, and a `response.failed` event appended, so
  followers end. It is not resumed: its upstream request died with the process. On
  SQLite with one process that is every unfinished response; on a shared database
  (PostgreSQL, or a SQLite file several workers share) only those whose runner has not
  been heard of for `STALE_MS` (the others are running on live processes).
- **While running, on a shared database** (`BackgroundWatch`): every `TICK` the process
  looks for cancel requests other replicas left for its runs; every `HEARTBEAT` it
  marks its runs alive and fails the stale ones of lost replicas.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.background.runs import BackgroundRuns, interrupted_event
from gateway.storage.background_responses import BackgroundStore, now_ms
from gateway.streaming.enrich import output_text
from gateway.streaming.sse import frame

log = logging.getLogger("gateway.background")
STALE_MS = 30_000
TICK = 0.5
HEARTBEAT = 10.0


async def fail_stale(store: BackgroundStore, older_than_ms: int | None) -> int:
    """Fail the unfinished responses not heard of since then (None: all); how many."""
    failed = 0
    for row in await store.stale(older_than_ms):
        batches = [frames for _, frames in await store.frames_after(row.id, -1)]
        event = interrupted_event(row.response, batches)
        response = event.data["response"]
        response.update(available_quotas={}, output_text=output_text(response))
        number = await store.last_seq(row.id) + 1
        if await store.finish(response, number, frame(event.type, event.payload(number)), 1):
            failed += 1
            log.warning("background response %s was left unfinished by a stopped gateway: marked failed", row.id)
    return failed


class BackgroundWatch:
    def __init__(self, runs: BackgroundRuns):
        self._runs = runs
        self._task: asyncio.Task[Any] | None = None
        # Cancels in flight, held until done: the event loop keeps only weak references.
        self._cancelling: set[asyncio.Future[None]] = set()

    async def start(self) -> None:
        store = self._runs.store
        await fail_stale(store, now_ms() - STALE_MS if store.shared else None)
        if store.shared:
            self._task = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        store, ticks = self._runs.store, 0
        while True:
            await asyncio.sleep(TICK)
            ticks += 1
            try:
                if self._runs.running:
                    for response_id in await store.cancel_requests(self._runs.runner):
                        run = self._runs.get(response_id)
                        if run is not None:
                            cancelling = asyncio.ensure_future(self._runs.cancel(run))
                            self._cancelling.add(cancelling)
                            cancelling.add_done_callback(self._cancelling.discard)
                if ticks * TICK >= HEARTBEAT:
                    ticks = 0
                    if self._runs.running:
                        await store.heartbeat(self._runs.runner)
                    await fail_stale(store, now_ms() - STALE_MS)
            except Exception as exc:  # the database is down: try again next tick
                log.warning("background watch: %s", exc)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
