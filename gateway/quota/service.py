"""`QuotaService`: what the pipeline and the quota API call.

- `reserve()` before a turn (in `pipeline.prepare()`, before anything is created):
  every applicable limiter reserves the turn's estimate, atomically, or the request is
  refused with LCORE's 429; storage that cannot be reached refuses with 503 (fail
  closed). The estimate and what a turn carries: `reservation.py`.
- `charge_statements()` after the turn (in `pipeline.settle()`): the upstream's
  input + output tokens, charged to every applicable limiter and releasing the
  reservation; the pipeline commits them with the turn's record when the quota storage
  is the turn database (`shares_turn_database`), else just before it (`write`).
- `settled()` / `available()`: `available_quotas`, keyed by limiter name (`settled()`
  without I/O once the charge is committed, which is nearly always).
- A background task (every `scheduler.period` seconds) measures the database clock's
  offset and, on PostgreSQL, gives this replica's spare back (`holds.py`) and releases
  expired holds (on SQLite the balances and reservations in use live in this process,
  `ledger.py`, the file's one writer).
- `now()`: the database's clock, for every period computation, without I/O.

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
import uuid
from datetime import datetime, timezone
from typing import Any, Sequence

from gateway.config_quota import QuotaHandlersConfig, QuotaLimiterConfig, same_database
from gateway.config_database import DatabaseConfig
from gateway.identity import Identity
from gateway.quota.admission import Admissions
from gateway.quota.balances import seconds_until
from gateway.quota.holds import Holds
from gateway.quota.ledger import Balance, Ledger
from gateway.quota.reservation import Reservation, estimate
from gateway.quota.store import CHARGE, Held, Pair, QuotaStore
from gateway.schema.errors import ApiError, quota_exceeded, quota_storage_unavailable
from gateway.storage.database import Database, DatabaseUnavailable
from gateway.storage.open import open_database
from gateway.storage.writer import Keyed, in_lock_order

log = logging.getLogger("gateway.quota")

CLUSTER = ""   # the cluster limiter's one subject, as in LCORE
_UNREACHABLE = (DatabaseUnavailable, sqlite3.OperationalError, OSError, asyncio.TimeoutError)
_ATTEMPTS = 3  # admission tries (a top-up can fall due between two)
_TICK = 0.001  # now()'s resolution in seconds


class QuotaService:
    def __init__(self, config: QuotaHandlersConfig | None = None, db: Database | None = None,
                 shares_turn_database: bool = False, owns_db: bool = False):
        self.config = config
        self.limiters: list[QuotaLimiterConfig] = list(config.limiters) if config and db is not None else []
        # No limiters, or no storage named (LCORE only warns): nothing to check or charge.
        self.enabled = bool(self.limiters)
        self._by_name = sorted(self.limiters, key=lambda limiter: limiter.name)
        self._named = {limiter.name: limiter for limiter in self.limiters}
        self._names = [limiter.name for limiter in self.limiters]
        self._by_name_names = [limiter.name for limiter in self._by_name]
        # (name, index in `pairs()`): balances in lock order shown in configuration order
        self._configuration_order = [(name, self._by_name_names.index(name)) for name in self._names]
        self._in_lock_order = self._names == self._by_name_names   # then nothing to reorder
        self._pairs: dict[str, tuple[Pair, ...]] = {}   # by user id (bounded: cleared when large)
        self._after_batch: dict[tuple[str, str], int] = {}   # balances read after the last writer batch
        self.store = QuotaStore(db) if db is not None else None
        # One writer process (SQLite): admission in memory, written through (ledger.py).
        self._ledger = Ledger(self.store) if self.store is not None and not db.shared else None
        # Several replicas (PostgreSQL): admission is a statement, shared by concurrent
        # turns, that reserves on this replica's holds; their spare admits in memory.
        self._holds = Holds(uuid.uuid4().hex[:16] + "-")   # hold row ids: this process's prefix and a count
        self._admissions = Admissions(self.store, self._holds, self.now, config.reservation_seconds, self.release) \
            if self.store is not None and self._ledger is None and config is not None else None
        self.shares_turn_database = shares_turn_database
        self._owns_db = owns_db
        self._offset = 0.0        # database clock minus process clock (seconds): `sync_clock()`
        self._last: tuple[float, datetime] = (-math.inf, datetime.min)   # the last now() made
        self._task: asyncio.Task | None = None

    @classmethod
    async def open(cls, config: QuotaHandlersConfig | None, turn_db: Database,
                   turn_db_config: DatabaseConfig) -> "QuotaService":
        """The configured service: on the turn database when `quota_handlers` names the
        same one (charge and record share a transaction), else on its own."""
        storage = config.storage if config is not None else None
        if config is None or storage is None or not config.limiters:
            return cls()
        if same_database(storage, turn_db_config):
            service = cls(config, turn_db, shares_turn_database=True)
        else:
            try:
                db = await open_database(storage)
            except DatabaseUnavailable as exc:
                raise DatabaseUnavailable(str(exc).replace("database.", "quota_handlers.", 1)) from None
            service = cls(config, db, owns_db=True)
        await service.sync_clock()
        return service

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.ensure_future(self._scheduler())

    async def close(self) -> None:
        """Stop the scheduler and delete this replica's hold rows (after the pipeline
        drained its turns), so a restart leaves nothing reserved."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._admissions is not None and len(self._holds):
            try:
                await self._admissions.give_back(self._holds.forget_all())
            except Exception as exc:   # they expire after reservation_seconds instead
                log.warning("deleting this replica's quota holds at shutdown failed: %s", exc)
        if self._owns_db and self.store is not None:
            await self.store.db.close()

    def pairs(self, user_id: str) -> tuple[Pair, ...]:
        """The balances a user's turn reserves on, in lock order (`store.balance_key`:
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
        assert self.store is not None
        self._offset = (await self.store.db.now()).timestamp() - time.time()
        self._last = (-math.inf, self._last[1])

    def now(self) -> datetime:
        """The database's clock: the process clock plus the offset `sync_clock()` measured."""
        moment = time.time() + self._offset
        if moment - self._last[0] >= _TICK:   # several turns a millisecond share one datetime
            self._last = (moment, datetime.fromtimestamp(moment, timezone.utc))
        return self._last[1]

    async def reserve(self, identity: Identity, raw: Any) -> Reservation | None:
        """Admit a turn or raise 429 (503 when the storage cannot be reached)."""
        if not self.enabled:
            return None
        assert self.store is not None and self.config is not None
        need = estimate(raw, self.config.output_reservation)
        reservation = Reservation(identity.user_id, need, self.pairs(identity.user_id))
        ledger = self._ledger
        if ledger is None and (holds := self._holds.admit(reservation.pairs, need, time.time() + self._offset)) \
                is not None:
            reservation.holds = holds   # the spare of this replica's holds covers it: no await at all
            return reservation
        balances = outcome = None
        if ledger is not None and (balances := ledger.lookup(reservation.user_id, reservation.pairs)) is not None:
            outcome = ledger.reserve(balances, need, time.time() + self._offset, self.now)
            if outcome[0] is None and not outcome[1]:   # in memory, nothing due, room: no await at all
                reservation.balances = balances
                return reservation
        try:
            if ledger is not None:
                return await self._reserve_locally(reservation, balances, outcome)
            assert self._admissions is not None
            admitted = await self._admissions.admit(reservation)   # with the turns asking meanwhile
            if admitted:
                return reservation
            now = self.now()
            for attempt in range(_ATTEMPTS):
                if (attempt or admitted is None) and await self._admissions.alone(reservation):
                    return reservation
                # A balance is missing, due a top-up, or short: which one?
                for held in await self.store.bring_up_to_date(reservation.pairs, now):
                    if held.room < need:
                        raise self._refusal(held, need, now)
                now = self.now()
        except ApiError:
            raise
        except _UNREACHABLE as exc:
            log.error("quota storage unavailable; refusing the turn: %s", exc)
            raise quota_storage_unavailable() from None
        log.error("quota admission of %s did not settle after %d attempts", identity.user_id, _ATTEMPTS)
        raise quota_storage_unavailable()

    async def _reserve_locally(self, reservation: Reservation, balances: tuple[Balance, ...] | None,
                               outcome: tuple[Held | None, list[Keyed]] | None) -> Reservation:
        """Admission by the ledger, from loading the balances (`balances` None) or from
        what `ledger.reserve` did with them (`outcome`: a refusal, top-ups to write)."""
        ledger = self._ledger
        assert ledger is not None
        if balances is None or outcome is None:
            balances = await ledger.load(reservation.user_id, reservation.pairs, self.now())
            outcome = ledger.reserve(balances, reservation.tokens, time.time() + self._offset, self.now)
        refused, top_ups = outcome
        if top_ups:  # once per period and subject: persisted before the turn goes on
            try:
                await self.write(top_ups)
            except BaseException:
                ledger.forget(balances)
                if refused is None:
                    ledger.settle(balances, reservation.tokens, 0)
                raise
        if refused is not None:
            raise self._refusal(refused, reservation.tokens, self.now())
        reservation.balances = balances
        return reservation

    @staticmethod
    def _refusal(held: Held, need: int, now: datetime) -> ApiError:
        who = f"User {held.subject}" if held.limiter.type == "user_limiter" else "Cluster"
        cause = f"{who} has no available tokens" if held.room <= 0 else \
            f"{who} has {held.room} tokens, but {need} tokens are needed"
        return quota_exceeded(cause, seconds_until(held.state.next_refill, now))

    def charge_statements(self, reservation: Reservation, input_tokens: int, output_tokens: int,
                          model: str | None, provider: str | None) -> list[Keyed]:
        assert self.config is not None
        history = (reservation.user_id, provider or "", model or "", input_tokens, output_tokens) \
            if self.config.enable_token_history else None
        return self._end(reservation, input_tokens + output_tokens, history)

    def _end(self, reservation: Reservation, charge: int,
             history: tuple[str, str, str, int, int] | None) -> list[Keyed]:
        """The statements that charge a reservation's turn and end it (in memory too,
        with the ledger: a failed write calls `forget`)."""
        assert self.store is not None
        dated = (*history, self.now().date()) if history is not None else None
        if self._ledger is None:
            return self.store.charge_statements(reservation, charge, dated)
        self._ledger.settle(reservation.balances, reservation.tokens, charge)
        return [self.store.ledger_charge(reservation.balances, charge, dated)]

    def forget(self, reservation: Reservation | None) -> None:
        """A charge could not be written: the ledger reads the balances again; on
        PostgreSQL the turn's tokens stay held, as spare (`Reservation.end`)."""
        if self._ledger is not None and reservation is not None:
            self._ledger.forget(reservation.balances)
        elif reservation is not None:
            reservation.end(released=False)

    def _charged(self, statements: Sequence[Keyed]) -> None:
        """The turns whose charges (markers) these committed statements hold ended."""
        for _, kind, params in statements:
            if kind == CHARGE:
                params["r"].end(released=True)

    async def release(self, reservation: Reservation, charge: int = 0) -> None:
        """End a reservation whose turn has no usage to charge: `charge` tokens (an
        abandoned turn is charged its reservation), the reservation deleted."""
        try:
            await self.write(self._end(reservation, charge, None))
        except Exception as exc:  # held until the scheduler gives the spare back
            self.forget(reservation)
            log.error("ending the quota reservation of a turn of %s (%d tokens charged) failed: %s",
                      reservation.user_id, charge, exc)

    async def write(self, statements: Sequence[Keyed]) -> None:
        """Commit a charge on its own (quota storage apart from the turn's record, or a
        turn with no record), in lock order."""
        assert self.store is not None
        await self.store.db.write(in_lock_order(self.store.combine(statements)))
        self._charged(statements)

    async def available(self, user_id: str) -> dict[str, int]:
        """`available_quotas`: each applicable limiter's balance, by limiter name."""
        if not self.enabled:
            return {}
        pairs = self.pairs(user_id)
        if self._ledger is None:
            return self._shown([held.state.available for held in await self.held(pairs)])
        values = Ledger.available(await self._ledger.load(user_id, pairs, self.now()), time.time() + self._offset,
                                  self.now)
        assert values is not None   # just loaded: none stale
        return self._shown(values)

    def _shown(self, values: Sequence[int]) -> dict[str, int]:
        """Balances in lock order (`pairs()`) as `available_quotas` shows them: by limiter
        name, in configuration order."""
        if self._in_lock_order:
            return dict(zip(self._names, values))
        return {name: values[index] for name, index in self._configuration_order}

    @property
    def reads_after_batches(self) -> bool:
        """Whether `after_commit` should follow the turn writer's batches: charges ride in
        them and the balances are in the database (PostgreSQL), so one read per batch
        serves every turn in it instead of one read per turn."""
        return self.shares_turn_database and self._ledger is None and self.enabled

    async def after_commit(self, statements: Sequence[Keyed], rows: Sequence[Any] = ()) -> None:
        """After a writer batch: the balances its charges changed, as the batch's charge
        statement returned them (`rows`), else read in one query."""
        assert self.store is not None
        self._charged(statements)
        returned = self.store.held_from(rows, self._named, self.now())
        if returned:
            self._after_batch = {(held.limiter.name, held.subject): held.state.available for held in returned}
            return
        pairs: dict[tuple[str, str], Pair] = {}   # by (name, subject): a limiter's config is not hashable
        for _, kind, params in statements:
            if kind == CHARGE:   # (the turns' own statements: markers, `QuotaStore.charge_statements`)
                for limiter, subject in params["r"].pairs:
                    pairs[(limiter.name, subject)] = (limiter, subject)
        if pairs:
            read = await self.store.read(list(pairs.values()), self.now())
            self._after_batch = {(held.limiter.name, held.subject): held.state.available for held in read}

    def settled(self, reservation: Reservation) -> dict[str, int] | None:
        """`available()` without I/O for a turn whose charge was just committed, or None
        (then `available()`): SQLite's from the ledger balances the reservation kept;
        PostgreSQL's as read after the writer's batch that charged it (or a later one)."""
        if self._ledger is None:
            return self._after_batch_for(reservation.pairs)
        values = Ledger.available(reservation.balances, time.time() + self._offset, self.now) \
            if reservation.balances else None
        return self._shown(values) if values is not None else None

    def _after_batch_for(self, pairs: tuple[Pair, ...]) -> dict[str, int] | None:
        found = self._after_batch
        try:
            values = [found[(limiter.name, subject)] for limiter, subject in pairs]
        except KeyError:
            return None
        return self._shown(values)

    async def available_after_batch(self, user_id: str) -> dict[str, int]:
        """`available()`, from the balances read after the writer's last batch when it
        charged them (PostgreSQL)."""
        found = self._after_batch_for(self.pairs(user_id)) if self._ledger is None and self.enabled else None
        return found if found is not None else await self.available(user_id)

    async def held(self, pairs: Sequence[Pair]) -> list[Held]:
        """The balances (brought up to date, not written) and what reservations hold."""
        assert self.store is not None
        now = self.now()
        if self._ledger is None:
            return await self.store.read(pairs, now)
        return self._ledger.read(await self._ledger.load(None, pairs, now), now)

    async def change(self, values: Sequence[tuple[Pair, int]], *, add: bool,
                     idempotency: tuple[str, str, str, str] | None = None) -> bool:
        """Set (or add to) balances; False when the increment's key was used before."""
        assert self.store is not None
        now = self.now()
        if self._ledger is None:
            return await self.store.change(values, now, add=add, idempotency=idempotency)
        balances = await self._ledger.load(None, [pair for pair, _ in values], now)
        top_ups: list[Keyed] = []
        deltas = [self._ledger.delta(balance, now, value, add, top_ups) for balance, (_, value) in zip(balances, values)]
        if top_ups:
            await self.write(top_ups)
        applied = await self.store.change([(pair, delta) for (pair, _), delta in zip(values, deltas)], now, add=True,
                                          idempotency=idempotency)
        if applied:
            for balance, delta in zip(balances, deltas):
                self._ledger.shift(balance, delta)
        return applied

    async def _scheduler(self) -> None:
        assert self.store is not None and self.config is not None
        while True:
            await asyncio.sleep(self.config.scheduler.period)
            try:
                await self.sync_clock()
                if self._ledger is not None:
                    continue  # reservations live in this process
                await self.give_back_holds()
                swept = await self.store.sweep(self.now())
                if swept:
                    log.warning("released expired quota holds (a replica that stopped) on %d balances",
                                swept)
            except Exception as exc:  # the next tick tries again
                log.warning("quota scheduler: %s", exc)

    async def give_back_holds(self) -> None:
        """The scheduler's period on PostgreSQL: this replica's spare given back, idle
        holds deleted, the others renewed (`Holds.tick`)."""
        if self._admissions is not None:
            await self._admissions.give_back(self._holds.tick())
