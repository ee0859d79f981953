"""How many turns each user has running (`InProgress`): a user past the operator's
limit (`service.max_responses_in_progress_per_user`) is refused with 429 before
anything is reserved or created, so one caller cannot hold every connection, task and
reservation. Background runs are turns running here too.

A process alone on its database counts in memory. Processes sharing one (replicas on
PostgreSQL, workers on one SQLite file) hold the cap together (`SharedInProgress`):
each leases places per user in the database (`storage/running_turns.py`) and admits
against its lease in memory; a turn past the lease asks for one more place, granted
only while every process's places stay within the limit. Places a process no longer
uses (none of its turns needed them for a whole `TICK`) are given back, so a user
whose turns just ended on one process may be refused on another for up to two ticks (never admitted past the limit). When the
database cannot be asked, the process's own count decides, as alone (the turn then
fails or not as its record does).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from gateway.schema.errors import ApiError, too_many_in_progress
from gateway.storage.running_turns import RunningTurnsStore

log = logging.getLogger("gateway.turns")

TICK = 1.0          # seconds between give-backs of unused places (and renewals)
LIFETIME = 30_000   # ms a lease lives without renewal (a process that died)
SWEEP_TICKS = 30    # ticks between deletions of expired leases


class InProgress:
    def __init__(self, limit: int, refusal: Callable[[str, int, int], ApiError] = too_many_in_progress):
        """`refusal(user_id, running, limit)`: the error past the limit (the WebSocket
        transport counts open sockets with its own)."""
        self._limit = limit
        self._refusal = refusal
        self._by_user: dict[str, int] = {}

    def enter(self, user_id: str) -> Awaitable[None] | None:
        """Count a turn of this user's in, or refuse it (429). None when decided here;
        else what to await for the decision (`SharedInProgress`: the database's)."""
        running = self._by_user.get(user_id, 0)
        if running >= self._limit:
            raise self._refusal(user_id, running, self._limit)
        self._by_user[user_id] = running + 1
        return None

    def leave(self, user_id: str) -> None:
        running = self._by_user.get(user_id, 0) - 1
        if running > 0:
            self._by_user[user_id] = running
        else:
            self._by_user.pop(user_id, None)

    def running(self, user_id: str) -> int:
        return self._by_user.get(user_id, 0)

    def start(self) -> None:
        """Nothing to run in the background (in memory)."""

    async def close(self) -> None:
        """Nothing to give back (in memory)."""


class SharedInProgress(InProgress):
    """The cap held across the processes of one database (see the module's doc)."""

    def __init__(self, limit: int, store: RunningTurnsStore):
        super().__init__(limit)
        self._store = store
        self._leased: dict[str, int] = {}   # places this process holds (or is asking for), by user
        self._peak: dict[str, int] = {}     # the most running at once since the last give-back, by user
        self._task: asyncio.Task[Any] | None = None

    def enter(self, user_id: str) -> Awaitable[None] | None:
        waiting = super().enter(user_id)   # past the limit here alone: refused without asking
        running = self._by_user[user_id]
        if running > self._peak.get(user_id, 0):
            self._peak[user_id] = running
        leased = self._leased.get(user_id, 0)
        if running <= leased:
            return waiting   # within this process's places: no await
        self._leased[user_id] = leased + 1   # asked for now: a give-back meanwhile leaves it
        return self._lease(user_id)

    async def _lease(self, user_id: str) -> None:
        now = int(time.time() * 1000)
        try:
            held = await self._store.lease(user_id, 1, self._limit, now, now + LIFETIME)
        except Exception as exc:
            # The database cannot be asked: this process's own count decides (as alone),
            # and the turn goes on to fail or not as its record does.
            log.warning("the database could not count running turns (this process's count decides): %s", exc)
            self._drop_lease(user_id)
            return
        except BaseException:
            self._unleased(user_id)
            raise
        if held is not None:
            self._unleased(user_id)
            raise self._refusal(user_id, held, self._limit)

    def _unleased(self, user_id: str) -> None:
        """The place asked for was not granted: the turn is not counted."""
        self._drop_lease(user_id)
        self.leave(user_id)

    def _drop_lease(self, user_id: str) -> None:
        leased = self._leased.get(user_id, 0) - 1
        if leased > 0:
            self._leased[user_id] = leased
        else:
            self._leased.pop(user_id, None)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(TICK)
            ticks += 1
            try:
                await self.give_back()
                if ticks % SWEEP_TICKS == 0:   # expired rows no longer count: deleting them can wait
                    await self._store.sweep(int(time.time() * 1000))
            except Exception as exc:   # the database is down: the leases expire, try again next tick
                log.warning("giving back places of running turns failed: %s", exc)

    async def give_back(self) -> None:
        """Places no turn used since the last give-back, given back; the rest renewed
        (under a steady load the places stay: a place is leased again only as the load
        grows)."""
        returned = []
        peaks, self._peak = self._peak, {}
        for user_id, leased in list(self._leased.items()):
            spare = leased - max(peaks.get(user_id, 0), self._by_user.get(user_id, 0))
            if spare > 0:   # applied here first: an `enter` meanwhile asks for its own place
                returned.append((user_id, spare))
                if spare == leased:
                    del self._leased[user_id]
                else:
                    self._leased[user_id] = leased - spare
        if returned or self._leased:
            try:
                await self._store.give_back(sorted(returned), int(time.time() * 1000) + LIFETIME)
            except BaseException:
                for user_id, spare in returned:   # still held in the database
                    self._leased[user_id] = self._leased.get(user_id, 0) + spare
                raise

    async def close(self) -> None:
        """After the turns drained: the task stopped, this process's rows deleted."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self._store.forget()
        except Exception as exc:   # they expire instead
            log.warning("deleting this process's places of running turns failed: %s", exc)
