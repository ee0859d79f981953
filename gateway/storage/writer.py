"""Group commit for turns: one task writes whatever has queued, in one transaction.

A turn's record is committed before the client gets its terminal event or body
(`pipeline.settle()` waits for it), so under load writes would pile up as one
transaction each; instead they queue here and a single writer drains the queue in
batches, lingering a few milliseconds so batches form (a few database round trips
per batch, not several per turn: measured, 270 µs of CPU for a turn written alone,
under 40 µs in a batch of ten). The queue is
bounded: `admit()` makes new turns wait while it is full, so a database slower than
the traffic slows intake instead of growing memory without limit.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Iterable, Sequence

from gateway.storage.conversations import ConversationRecord, ConversationRepository, TurnRecord
from gateway.storage.database import Params, Row, committed

log = logging.getLogger("gateway.storage")

Entry = tuple[ConversationRecord, TurnRecord | None]
# Extra statements of a turn (its quota charge): (lock order, sql, params). A batch runs
# them sorted by the first item, a total order on the rows they lock (e.g. "balance\0
# <limiter>\0<subject>"), so two concurrent transactions that follow it cannot deadlock.
Keyed = tuple[str, str, Params]
Statements = Sequence[Keyed]


class TurnWriter:
    def __init__(self, repository: ConversationRepository, max_queued: int = 2000, max_batch: int = 500,
                 linger: float = 0.0025):
        self._repository = repository
        self._linger = linger
        self._max_queued = max_queued
        self._max_batch = max_batch
        self._queue: list[tuple[Entry, Statements, asyncio.Future]] = []
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._concurrent = False  # the last batch held more than one turn
        # Called with a committed batch's extra statements before its clients are told
        # (the quota service reads the balances they charged, once per batch).
        self.after_commit: Callable[[list[Keyed], list[Row]], Awaitable[None]] | None = None
        # Merges a batch's extra statements on one row into one (`QuotaStore.combine`).
        self.combine: Callable[[list[Keyed]], list[Keyed]] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def submit(self, conversation: ConversationRecord, turn: TurnRecord | None,
               extra: Statements = ()) -> asyncio.Future:
        """Queue a write; the future resolves once it is committed. `extra` statements
        (a turn's quota charge) commit in the same transaction as the record."""
        done = asyncio.get_running_loop().create_future()
        self._queue.append(((conversation, turn), extra, done))
        if len(self._queue) >= self._max_queued:
            self._room.clear()
        self._wakeup.set()
        return done

    async def admit(self) -> None:
        """Wait while the queue is full (backpressure on new turns)."""
        if not self._room.is_set():
            await self._room.wait()

    async def close(self) -> None:
        """Write everything queued (including a batch being written), then stop."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            if self._concurrent and not self._closing:
                # Let a batch form: one transaction costs about as much as ten rows, so
                # waiting a little makes each turn cheaper under load. Only under load:
                # the batch's clients wait for it (their terminal events follow the
                # commit), and a turn alone would wait for nothing. 2.5 ms is the
                # trade-off measured with bench/ (json, engine; 1 round each): 5 ms gave
                # 200 µs CPU per JSON turn but 10.5 ms p50 and 98k engine events/s;
                # 2.5 ms gives 223 µs, 7.0 ms p50 and 120k events/s; 1 ms is no better.
                await asyncio.sleep(self._linger)
            self._wakeup.clear()
            while self._queue:
                batch, self._queue = self._queue[:self._max_batch], self._queue[self._max_batch:]
                self._concurrent = len(batch) > 1
                if len(self._queue) < self._max_queued // 2:
                    self._room.set()
                await self._write(batch)
            if self._closing:
                return

    async def _write(self, batch: list[tuple[Entry, Statements, asyncio.Future]]) -> None:
        try:
            extras = [statement for _, extra, _ in batch for statement in extra]
            returned = await self._repository.save_many(
                [entry for entry, _, _ in batch], in_lock_order(self.combine(extras) if self.combine else extras))
            results: list[BaseException | None] = [None] * len(batch)
        except Exception:
            # One bad entry must not lose the others: retry them one by one.
            log.exception("writing %d turns failed; retrying one by one", len(batch))
            results, returned = [], []
            for entry, extra, _ in batch:
                try:
                    await self._repository.save_many([entry], in_lock_order(self.combine(extra) if self.combine else extra))
                    results.append(None)
                except Exception as exc:
                    log.error("recording turn %s failed: %s", entry[1] and entry[1].response_id, exc)
                    results.append(exc)
        if self.after_commit is not None:
            extras = [statement for (_, extra, _), error in zip(batch, results) if error is None for statement in extra]
            if extras:
                try:
                    await self.after_commit(extras, returned)
                except Exception as exc:  # its reader falls back to reading for itself
                    log.warning("after a batch of turns: %s", exc)
        for (_, _, done), error in zip(batch, results):
            committed(done, error)


def in_lock_order(statements: Iterable[Keyed]) -> list[tuple[str, Params]]:
    """Keyed statements as the database API takes them, sorted by their lock order."""
    return [(sql, params) for _, sql, params in sorted(statements, key=lambda statement: statement[0])]
