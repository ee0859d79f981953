"""Group commit for turns: one task writes whatever has queued, in one transaction.

A turn's record is committed before the client gets its terminal event or body
(`turns/settle.py` waits for it), so under load writes would pile up as one
transaction each; instead they queue here and a single writer drains the queue in
batches, lingering a few milliseconds so batches form (a few database round trips
per batch, not several per turn: measured, 270 µs of CPU for a turn written alone,
under 40 µs in a batch of ten). A turn's quota charge commits with its record, the
batch's charges made statements together (`batch.py`). The queue is
bounded: `admit()` makes new turns wait while it is full, so a database slower than
the traffic slows intake instead of growing memory without limit.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.storage.batch import BatchParticipant, in_lock_order
from gateway.storage.conversations import ConversationRecord, ConversationRepository, TurnRecord
from gateway.storage.database import committed

log = logging.getLogger("gateway.storage")

Entry = tuple[ConversationRecord, TurnRecord | None]
Queued = tuple[Entry, Any, asyncio.Future[Any]]   # a turn's records, its charge (or None), its waiter


class TurnWriter:
    def __init__(self, repository: ConversationRepository, participant: BatchParticipant[Any] | None = None,
                 max_queued: int = 2000, max_batch: int = 500, linger: float = 0.0025):
        self._repository = repository
        # What the turns' charges are made of and told of (the quota service, when its
        # balances live in this database): `storage/batch.py`.
        self._participant = participant
        self._linger = linger
        self._max_queued = max_queued
        self._max_batch = max_batch
        self._queue: list[Queued] = []
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._task: asyncio.Task[Any] | None = None
        self._closing = False
        self._concurrent = False  # the last batch held more than one turn
        # Observers of the group commit (traces: `queued(waiter)` as a turn queues,
        # `writing(waiters)` → a token given back to `written(token, failed)`); None: off.
        self.hooks: Any = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def submit(self, conversation: ConversationRecord, turn: TurnRecord | None, charge: Any = None) -> asyncio.Future[Any]:
        """Queue a write; the future resolves once it is committed. A `charge` (the
        turn's quota charge, for the participant) commits in the same transaction."""
        if charge is not None and self._participant is None:
            raise ValueError("a charge for a turn writer without a batch participant")
        done = asyncio.get_running_loop().create_future()
        self._queue.append(((conversation, turn), charge, done))
        if self.hooks is not None:
            self.hooks.queued(done)
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

    async def _write(self, batch: list[Queued]) -> None:
        participant = self._participant
        observed = self.hooks.writing([done for _, _, done in batch]) if self.hooks is not None else None
        try:
            charges = [charge for _, charge, _ in batch if charge is not None]
            returned = await self._repository.save_many(
                [entry for entry, _, _ in batch],
                in_lock_order(participant.statements(charges)) if charges and participant is not None else [])
            results: list[BaseException | None] = [None] * len(batch)
        except Exception:
            # One bad entry must not lose the others: retry them one by one.
            log.exception("writing %d turns failed; retrying one by one", len(batch))
            results, returned = [], []
            for entry, charge, _ in batch:
                try:
                    await self._repository.save_many(
                        [entry], in_lock_order(participant.statements([charge]))
                        if charge is not None and participant is not None else [])
                    results.append(None)
                except Exception as exc:
                    log.error("recording turn %s failed: %s", entry[1] and entry[1].response_id, exc)
                    results.append(exc)
        if participant is not None:
            charges = [charge for (_, charge, _), error in zip(batch, results) if error is None and charge is not None]
            if charges:
                try:
                    await participant.committed(charges, returned)
                except Exception as exc:  # its reader falls back to reading for itself
                    log.warning("after a batch of turns: %s", exc)
        if observed is not None:
            self.hooks.written(observed, sum(error is not None for error in results))
        for (_, _, done), error in zip(batch, results):
            committed(done, error)
