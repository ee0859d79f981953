"""What the two strategies that keep balances share (`LimitedQuota`): the limiters'
configuration, the balances a user's turn reserves on (`pairs`), the database's clock,
`available_quotas` shown in configuration order, a turn's charge and its release, the
admin change, the token history and the scheduler. Each strategy adds where admission
is decided and where the balances in use are held: `sqlite_ledger.py` (in this
process), `postgres_holds.py` (in the database, several replicas sharing them).

The per-turn path (reserve, charge, settled) awaits nothing it does not have to: on
the benchmark's VM a coroutine, a task or an async context manager each cost a few µs
of a turn's ~270, and the target is quotas within 10 % of none (bench/quota.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import time
from abc import ABC, abstractmethod
from datetime import datetime, timezone
from typing import Any, Sequence

from gateway.config.quota import QuotaHandlersConfig, QuotaLimiterConfig
from gateway.identity import Identity
from gateway.quota.balances import CLUSTER, Held, Pair, seconds_until
from gateway.quota.reservation import Charge, Reservation
from gateway.quota.store import QuotaStore, Usage, UsageSum
from gateway.schema.errors import ApiError, quota_exceeded, quota_storage_unavailable
from gateway.storage.batch import BatchParticipant, Keyed, in_lock_order
from gateway.storage.database import Database, DatabaseUnavailable, Row
from gateway.user_ids import logged_user

log = logging.getLogger("gateway.quota")

UNREACHABLE = (DatabaseUnavailable, sqlite3.OperationalError, OSError, asyncio.TimeoutError)
_TICK = 0.001  # now()'s resolution in seconds


class LimitedQuota(ABC):
    enabled = True

    def __init__(self, config: QuotaHandlersConfig, db: Database, shares_turn_database: bool = False,
                 owns_db: bool = False):
        self.config = config
        self.limiters: list[QuotaLimiterConfig] = list(config.limiters)
        self._by_name = sorted(self.limiters, key=lambda limiter: limiter.name)
        self._named = {limiter.name: limiter for limiter in self.limiters}
        self._names = [limiter.name for limiter in self.limiters]
        self._by_name_names = [limiter.name for limiter in self._by_name]
        # (name, index in `pairs()`): balances in lock order shown in configuration order
        self._configuration_order = [(name, self._by_name_names.index(name)) for name in self._names]
        self._in_lock_order = self._names == self._by_name_names   # then nothing to reorder
        self._pairs: dict[str, tuple[Pair, ...]] = {}   # by user id (bounded: cleared when large)
        self._history = config.enable_token_history
        self.store = QuotaStore(db)
        # The charge and the turn's record share a transaction (the turn writer's batch).
        self.shares_turn_database = shares_turn_database
        self._owns_db = owns_db
        self._offset = 0.0        # database clock minus process clock (seconds): `sync_clock()`
        self._last: tuple[float, datetime] = (-math.inf, datetime.min)   # the last now() made
        self._task: asyncio.Task[Any] | None = None

    @property
    def batch(self) -> BatchParticipant[Charge] | None:
        """What the turn writer makes its batches' charges with (`storage/batch.py`),
        when the balances live in the turn database."""
        return self if self.shares_turn_database else None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._scheduler())

    async def close(self) -> None:
        """Stop the scheduler, then what the strategy leaves behind (after every
        turn was recorded)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._closing()
        if self._owns_db:
            await self.store.db.close()

    async def _closing(self) -> None:
        """What is left to do at shutdown (PostgreSQL: this replica's holds deleted)."""

    def pairs(self, user_id: str) -> tuple[Pair, ...]:
        """The balances a user's turn reserves on, in lock order (`balances.balance_key`:
        limiter names are unique, so by name)."""
        found = self._pairs.get(user_id)
        if found is None:
            if len(self._pairs) >= 10000:
                self._pairs.clear()
            found = self._pairs[user_id] = tuple((limiter, user_id if limiter.type == "user_limiter" else CLUSTER)
                                                 for limiter in self._by_name)
        return found

    async def sync_clock(self) -> None:
        """Measure the database clock's offset from the process clock (`Database.now()`):
        at start-up, then every scheduler period."""
        self._offset = (await self.store.db.now()).timestamp() - time.time()
        self._last = (-math.inf, self._last[1])

    def now(self) -> datetime:
        """The database's clock: the process clock plus the offset `sync_clock()` measured."""
        moment = time.time() + self._offset
        if moment - self._last[0] >= _TICK:   # several turns a millisecond share one datetime
            self._last = (moment, datetime.fromtimestamp(moment, timezone.utc))
        return self._last[1]

    @abstractmethod
    async def reserve(self, identity: Identity, raw: Any) -> Reservation:
        """Admit a turn or raise 429 (503 when the storage cannot be reached)."""

    @abstractmethod
    async def extend(self, reservation: Reservation, tokens: int) -> None:
        """Reserve `tokens` more for a turn already admitted (its context once known, the
        engine's next round), all or none, or raise 429 (503 when the storage cannot be
        reached); the turn's charge then ends the whole reservation."""

    @staticmethod
    def _refusal(held: Held, need: int, now: datetime) -> ApiError:
        who = f"User {held.subject}" if held.limiter.type == "user_limiter" else "Cluster"
        cause = f"{who} has no available tokens" if held.room <= 0 else \
            f"{who} has {held.room} tokens, but {need} tokens are needed"
        return quota_exceeded(cause, seconds_until(held.state.next_refill, now), held.limiter.name)

    @staticmethod
    def _unreachable(exc: BaseException) -> ApiError:
        log.error("quota storage unavailable; refusing the turn: %s", exc)
        return quota_storage_unavailable()

    def charge(self, reservation: Reservation, input_tokens: int, output_tokens: int, model: str | None,
               provider: str | None) -> Charge:
        """A turn's charge: the upstream's input + output tokens to every limiter,
        ending its reservation once committed (with the turn's record, or `write`)."""
        usage = Usage(reservation.user_id, provider or "", model or "", input_tokens, output_tokens,
                      self.now().date()) if self._history else None
        return self._end(reservation, input_tokens + output_tokens, usage)

    def _end(self, reservation: Reservation, tokens: int, usage: Usage | None) -> Charge:
        """The charge that ends a reservation (the ledger also applies it in memory: a
        failed write calls `forget`)."""
        return Charge(reservation, tokens, usage)

    @abstractmethod
    def forget(self, reservation: Reservation | None) -> None:
        """A charge could not be written."""

    @abstractmethod
    def statements(self, charges: Sequence[Charge]) -> list[Keyed]:
        """The statements of these turns' charges (`storage.batch.BatchParticipant`)."""

    async def committed(self, charges: Sequence[Charge], rows: Sequence[Row]) -> None:
        """These charges committed with a writer batch (`storage.batch.BatchParticipant`)."""

    def _ended(self, charges: Sequence[Charge]) -> None:
        """These charges committed (PostgreSQL: their holds release what they held)."""

    async def release(self, reservation: Reservation, charge: int = 0) -> None:
        """End a reservation whose turn has no usage to charge: `charge` tokens (an
        abandoned turn is charged its reservation), the reservation deleted."""
        try:
            await self.write(self._end(reservation, charge, None))
        except Exception as exc:  # held until the scheduler gives the spare back
            self.forget(reservation)
            log.error("ending the quota reservation of a turn of %s (%d tokens charged) failed: %s",
                      logged_user(reservation.user_id), charge, exc)

    async def write(self, *charges: Charge) -> None:
        """Commit charges on their own (quota storage apart from the turn's record, or a
        turn with no record), in lock order."""
        await self.store.db.write(in_lock_order(self.statements(charges)))
        self._ended(charges)

    async def available(self, user_id: str) -> dict[str, int]:
        """`available_quotas`: each applicable limiter's balance, by limiter name."""
        return self._shown(await self._available(user_id, self.pairs(user_id)))

    @abstractmethod
    async def _available(self, user_id: str, pairs: tuple[Pair, ...]) -> Sequence[int]: ...

    @abstractmethod
    def settled(self, reservation: Reservation) -> dict[str, int] | None:
        """`available()` without I/O for a turn whose charge was just committed, or None
        (then `available()`)."""

    def _shown(self, values: Sequence[int]) -> dict[str, int]:
        """Balances in lock order (`pairs()`) as `available_quotas` shows them: by limiter
        name, in configuration order."""
        if self._in_lock_order:
            return dict(zip(self._names, values))
        return {name: values[index] for name, index in self._configuration_order}

    @abstractmethod
    async def held(self, pairs: Sequence[Pair]) -> list[Held]:
        """The balances (brought up to date, not written) and what reservations hold."""

    async def change(self, values: Sequence[tuple[Pair, int]], *, add: bool,
                     idempotency: tuple[str, str, str, str] | None = None) -> bool:
        """Set (or add to) balances; False when the increment's key was used before."""
        return await self.store.change(values, self.now(), add=add, idempotency=idempotency)

    async def usage(self, start: str, end: str, user_id: str | None) -> list[UsageSum]:
        """Token history summed per user, provider and model over UTC days start..end."""
        return await self.store.usage(start, end, user_id)

    async def _scheduler(self) -> None:
        while True:
            await asyncio.sleep(self.config.scheduler.period)
            try:
                await self.sync_clock()
                await self._tick()
            except Exception as exc:  # the next tick tries again
                log.warning("quota scheduler: %s", exc)

    async def _tick(self) -> None:
        """The scheduler's period beyond the clock (nothing where reservations live in
        this process)."""
