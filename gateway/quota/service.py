"""`QuotaService`: what the pipeline and the quota API call.

- `reserve()` before a turn (in `pipeline.prepare()`, before anything is created):
  every applicable limiter reserves the turn's estimate, atomically, or the request is
  refused with LCORE's 429; storage that cannot be reached refuses with 503 (fail
  closed). The estimate: the request's `input` and `instructions` at four characters a
  token (their JSON text), plus `max_output_tokens`, or `output_reservation` without it.
- `charge_statements()` after the turn (in `pipeline.settle()`): the upstream's
  input + output tokens, charged to every applicable limiter and releasing the
  reservation; the pipeline commits them with the turn's record when the quota storage
  is the turn database (`shares_turn_database`), else just before it (`write`).
- `available()`: `available_quotas`, keyed by limiter name.
- A background task (every `scheduler.period` seconds) deletes expired reservations
  and refreshes the offset to the database clock.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

import orjson

from gateway.config_quota import QuotaHandlersConfig, QuotaLimiterConfig, same_database
from gateway.config_database import DatabaseConfig
from gateway.identity import Identity
from gateway.quota.balances import seconds_until
from gateway.quota.store import Held, Pair, QuotaStore
from gateway.schema.errors import ApiError, quota_exceeded, quota_storage_unavailable
from gateway.storage.database import Database, DatabaseUnavailable, Params, open_database

log = logging.getLogger("gateway.quota")

CLUSTER = ""   # the cluster limiter's one subject, as in LCORE
_UNREACHABLE = (DatabaseUnavailable, sqlite3.OperationalError, OSError, asyncio.TimeoutError)
_ATTEMPTS = 3  # admission tries (a top-up can fall due between two)


@dataclass(frozen=True, slots=True)
class Reservation:
    id: str
    user_id: str
    tokens: int
    pairs: tuple[Pair, ...]


def estimate(raw: Any, output_reservation: int) -> int:
    """The tokens a request reserves (see the module docstring)."""
    size = len(orjson.dumps(raw.get("input"))) if raw.get("input") is not None else 0
    if isinstance(raw.get("instructions"), str):
        size += len(raw["instructions"])
    output = raw.get("max_output_tokens")
    if not isinstance(output, int) or isinstance(output, bool) or output <= 0:
        output = output_reservation
    return math.ceil(size / 4) + output


class QuotaService:
    def __init__(self, config: QuotaHandlersConfig | None = None, db: Database | None = None,
                 shares_turn_database: bool = False, owns_db: bool = False):
        self.config = config
        self.limiters: list[QuotaLimiterConfig] = list(config.limiters) if config and db is not None else []
        # No limiters, or no storage named (LCORE only warns): nothing to check or charge.
        self.enabled = bool(self.limiters)
        self.store = QuotaStore(db) if db is not None else None
        self.shares_turn_database = shares_turn_database
        self._owns_db = owns_db
        self._offset = 0.0        # database clock minus process clock (seconds)
        self._synced = -math.inf  # time.monotonic() of the last sync
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
            return cls(config, turn_db, shares_turn_database=True)
        try:
            db = await open_database(storage)
        except DatabaseUnavailable as exc:
            raise DatabaseUnavailable(str(exc).replace("database.", "quota_handlers.", 1)) from None
        return cls(config, db, owns_db=True)

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.ensure_future(self._scheduler())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._owns_db and self.store is not None:
            await self.store.db.close()

    def pairs(self, user_id: str) -> tuple[Pair, ...]:
        return tuple((limiter, user_id if limiter.type == "user_limiter" else CLUSTER) for limiter in self.limiters)

    async def now(self) -> datetime:
        """The database's clock: the process clock plus an offset measured with
        `Database.now()` at most once per scheduler period."""
        assert self.store is not None and self.config is not None
        if time.monotonic() - self._synced > self.config.scheduler.period:
            self._synced = time.monotonic()
            self._offset = (await self.store.db.now()).timestamp() - time.time()
        return datetime.fromtimestamp(time.time() + self._offset, timezone.utc)

    async def reserve(self, identity: Identity, raw: Any) -> Reservation | None:
        """Admit a turn or raise 429 (503 when the storage cannot be reached)."""
        if not self.enabled:
            return None
        assert self.store is not None and self.config is not None
        need = estimate(raw, self.config.output_reservation)
        reservation = Reservation(uuid.uuid4().hex, identity.user_id, need, self.pairs(identity.user_id))
        try:
            now = await self.now()
            expires = now + timedelta(seconds=self.config.reservation_seconds)
            for attempt in range(_ATTEMPTS):
                failed = await self.store.reserve(reservation.id, reservation.pairs, need, now, expires)
                if failed is None:
                    return reservation
                held = await self.store.bring_up_to_date(reservation.pairs, now)
                if failed % 2 == 1 or attempt == _ATTEMPTS - 1:
                    refused = held[failed // 2]
                    if refused.room < need:
                        raise self._refusal(refused, need, now)
                now = await self.now()
        except ApiError:
            raise
        except _UNREACHABLE as exc:
            log.error("quota storage unavailable; refusing the turn: %s", exc)
            raise quota_storage_unavailable() from None
        log.error("quota admission of %s did not settle after %d attempts", identity.user_id, _ATTEMPTS)
        raise quota_storage_unavailable()

    @staticmethod
    def _refusal(held: Held, need: int, now: datetime) -> ApiError:
        who = f"User {held.subject}" if held.limiter.type == "user_limiter" else "Cluster"
        cause = f"{who} has no available tokens" if held.room <= 0 else \
            f"{who} has {held.room} tokens, but {need} tokens are needed"
        return quota_exceeded(cause, seconds_until(held.state.next_refill, now))

    async def charge_statements(self, reservation: Reservation, input_tokens: int, output_tokens: int,
                                model: str | None, provider: str | None) -> list[tuple[str, Params]]:
        assert self.store is not None and self.config is not None
        history = (reservation.user_id, provider or "", model or "", input_tokens, output_tokens) \
            if self.config.enable_token_history else None
        return self.store.charge_statements(reservation.id, reservation.pairs, input_tokens + output_tokens,
                                            await self.now(), history)

    async def release(self, reservation: Reservation, charge: int = 0) -> None:
        """End a reservation whose turn has no usage to charge: `charge` tokens (an
        abandoned turn is charged its reservation), the reservation deleted."""
        assert self.store is not None
        try:
            await self.write(self.store.charge_statements(reservation.id, reservation.pairs, charge,
                                                          await self.now(), None))
        except Exception as exc:  # it expires after reservation_seconds instead
            log.error("ending quota reservation %s (%d tokens charged) failed: %s", reservation.id, charge, exc)

    async def write(self, statements: Sequence[tuple[str, Params]]) -> None:
        """Commit a charge on its own (quota storage apart from the turn's record, or a
        turn with no record)."""
        assert self.store is not None
        await self.store.db.write(statements)

    async def available(self, user_id: str) -> dict[str, int]:
        """`available_quotas`: each applicable limiter's balance, by limiter name."""
        if not self.enabled:
            return {}
        assert self.store is not None
        return {held.limiter.name: held.state.available
                for held in await self.store.read(self.pairs(user_id), await self.now())}

    async def _scheduler(self) -> None:
        assert self.store is not None and self.config is not None
        while True:
            await asyncio.sleep(self.config.scheduler.period)
            try:
                swept = await self.store.sweep(await self.now())
                if swept:
                    log.warning("released %d expired quota reservations (turns that never settled)", swept)
            except Exception as exc:  # the next tick tries again
                log.warning("quota scheduler: %s", exc)
