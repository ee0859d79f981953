"""Group admission on PostgreSQL: one statement for the turns that arrive together.

Admission must see every replica's reservations, so on PostgreSQL a turn the replica's
holds cannot cover in memory (`holds.py`) asks the database (`QuotaStore.reserve`), and
a round trip costs the gateway more CPU than the rest of a turn's quota work (~90 µs
through asyncpg on the benchmark's VM). As with the turn writer's group commit, turns
that ask while a statement is in flight go together in the next one: one task sends the
queue as one statement, which locks the batch's balance rows in lock order and reserves
the batch's need on each (with a spare for the turns after it when the balance has
plenty of room) only if each balance has room for the batch's sum (so nothing is
overspent, across replicas too: the rows are locked). A batch that does not fit (a
balance missing, due a top-up, or short for the sum) reserves nothing, and its turns
try alone (`HoldsQuota.reserve`), each all or none as before. No lingering: a turn
alone is sent at once.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable

from gateway.quota.holds import SPARE, Hold, Holds
from gateway.quota.reservation import Reservation
from gateway.quota.store import QuotaStore

log = logging.getLogger("gateway.quota")

_MAX_BATCH = 500


class Admissions:
    def __init__(self, store: QuotaStore, holds: Holds, clock: Callable[[], datetime], seconds: float,
                 orphan: Callable[[Reservation], Awaitable[None]]):
        self._store = store
        self._holds = holds
        self._clock = clock
        self._seconds = seconds            # a hold row's lifetime without renewal (`reservation_seconds`)
        self._orphan = orphan              # releases a reservation whose caller left
        self._queue: list[tuple[Reservation, asyncio.Future[Any]]] = []
        self._task: asyncio.Task[Any] | None = None
        self._releasing: set[asyncio.Future[Any]] = set()
        self.statements = 0                # sent so far (tests count them)

    async def admit(self, reservation: Reservation) -> bool | None:
        """True: reserved. False: refused alone (no room, a row missing or due a top-up).
        None: its batch did not fit, so nothing was reserved: try alone."""
        done: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        self._queue.append((reservation, done))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        return await done

    async def alone(self, reservation: Reservation) -> bool:
        """One turn's admission, at once (after its batch did not fit)."""
        return await self._ask([reservation], spare=False)

    async def _run(self) -> None:
        while self._queue:
            batch = self._from_spare(self._queue[:_MAX_BATCH])
            self._queue = self._queue[_MAX_BATCH:]
            if not batch:
                continue
            try:
                admitted = await self._ask([reservation for reservation, _ in batch], spare=True)
            except BaseException as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                    raise
                continue
            result = True if admitted else (False if len(batch) == 1 else None)
            for reservation, done in batch:
                if not done.done():
                    done.set_result(result)
                elif admitted:  # its request was cancelled meanwhile: give the tokens back
                    released = asyncio.ensure_future(self._orphan(reservation))
                    self._releasing.add(released)   # a task the loop only holds weakly
                    released.add_done_callback(self._releasing.discard)

    def _from_spare(self, batch: list[tuple[Reservation, asyncio.Future[Any]]]) -> list[tuple[Reservation, asyncio.Future[Any]]]:
        """Admit the queued turns the spare now covers (the statement before this one
        brought some): the others still need a statement."""
        rest = []
        now = self._clock().timestamp()
        for reservation, done in batch:
            if done.done():   # its request was cancelled while it waited: nothing to reserve
                continue
            holds = self._holds.admit(reservation.pairs, reservation.tokens, now)
            if holds is None:
                rest.append((reservation, done))
            else:
                reservation.holds = holds
                done.set_result(True)
        return rest

    async def _ask(self, reservations: list[Reservation], spare: bool) -> bool:
        """One statement for these turns: each one's tokens on each of its balances,
        reserved on this replica's holds, all or none."""
        needs: dict[Hold, int] = {}
        for reservation in reservations:
            reservation.holds = self._holds.for_pairs(reservation.pairs)
            for hold in reservation.holds:
                needs[hold] = needs.get(hold, 0) + reservation.tokens
        for hold in needs:
            hold.asking += 1
        try:
            now = self._clock()
            self.statements += 1
            granted = await self._store.reserve(
                [(hold.id, hold.limiter, hold.subject, need, max(SPARE * need, SPARE * hold.used) if spare else 0)
                 for hold, need in needs.items()],
                now, now + timedelta(seconds=self._seconds))
        except BaseException:
            granted = None
            raise
        finally:
            for hold in needs:
                hold.asking -= 1
            if granted is None:
                for reservation in reservations:
                    reservation.holds = ()
        if granted is None:
            return False
        for hold, need in needs.items():
            tokens, hold.until = granted[(hold.limiter, hold.subject)]
            hold.held += tokens
            hold.used += need
        return True

    async def give_back(self, changes: list[tuple[str, str, str, int, bool]]) -> None:
        """Hold rows given back (`Holds.tick`, `Holds.forget_all`), the kept ones'
        expiry renewed. A row found missing was deleted by a sweep (this replica stalled
        past its expiry): its hold no longer counts on anything in the database."""
        if not changes:
            return
        kept = await self._store.give_back(changes, self._clock() + timedelta(seconds=self._seconds))
        for hold in self._holds.missing(kept, changes):
            log.warning("quota hold %s on %s was released by another replica's sweep", hold.id, hold.limiter)
            hold.held = 0
