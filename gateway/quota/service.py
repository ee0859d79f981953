"""`QuotaService`: what a turn's life and the quota API call, one protocol, and the
strategy behind it chosen when it opens (`open_quota`): no quotas (`off.py`), the SQLite
ledger (`sqlite_ledger.py`) or the PostgreSQL holds (`postgres_holds.py`), sharing what
they can (`limited.py`).

- `reserve()` before a turn (in `turns/prepare.py`, before anything is created):
  every applicable limiter reserves the turn's estimate, atomically, or the request is
  refused with LCORE's 429; storage that cannot be reached refuses with 503 (fail
  closed). The estimate and what a turn carries: `reservation.py`.
- `extend()` during a turn: more tokens on its reservation, or 429 (its context once
  the conversation is looked up; each engine round after the first).
- `charge()` after the turn (in `turns/settle.py`): the upstream's input + output
  tokens, charged to every applicable limiter and releasing the reservation (a
  `Charge`); the turn writer commits it with the turn's record when the quota storage
  is the turn database (`shares_turn_database`: the writer's `batch` participant), else
  `write()` commits it just before.
- `settled()` / `available()`: `available_quotas`, keyed by limiter name (`settled()`
  without I/O once the charge is committed, which is nearly always).
- A background task (every `scheduler.period` seconds) measures the database clock's
  offset and, on PostgreSQL (or workers sharing a SQLite file), gives this process's
  spare back (`holds.py`) and releases expired holds (on SQLite alone the balances and
  reservations in use live in this process, `ledger.py`, the file's one writer).
- `now()`: the database's clock, for every period computation, without I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, Sequence

from gateway.config.database import DatabaseConfig
from gateway.config.quota import QuotaHandlersConfig, QuotaLimiterConfig, same_database
from gateway.identity import Identity
from gateway.quota.balances import Held, Pair
from gateway.quota.limited import LimitedQuota
from gateway.quota.off import QuotaOff
from gateway.quota.postgres_holds import HoldsQuota
from gateway.quota.reservation import Charge, Reservation
from gateway.quota.sqlite_ledger import LedgerQuota
from gateway.quota.store import UsageSum
from gateway.storage.batch import BatchParticipant
from gateway.storage.database import Database, DatabaseUnavailable
from gateway.storage.open import open_database


class QuotaService(Protocol):
    limiters: list[QuotaLimiterConfig]   # as configured (`available_quotas` shows them in this order)
    enabled: bool                        # False: nothing is checked or charged
    shares_turn_database: bool           # a charge commits with the turn's record

    @property
    def batch(self) -> BatchParticipant[Charge] | None:
        """The turn writer's batch participant when `shares_turn_database`."""
        ...

    def start(self) -> None: ...

    async def close(self) -> None: ...

    def pairs(self, user_id: str) -> tuple[Pair, ...]: ...

    def now(self) -> datetime: ...

    async def reserve(self, identity: Identity, raw: Any) -> Reservation | None: ...

    async def extend(self, reservation: Reservation, tokens: int) -> None: ...

    def charge(self, reservation: Reservation, input_tokens: int, output_tokens: int, model: str | None,
               provider: str | None) -> Charge: ...

    async def write(self, *charges: Charge) -> None: ...

    async def release(self, reservation: Reservation, charge: int = 0) -> None: ...

    def forget(self, reservation: Reservation | None) -> None: ...

    def settled(self, reservation: Reservation) -> dict[str, int] | None: ...

    async def available(self, user_id: str) -> dict[str, int]: ...

    async def held(self, pairs: Sequence[Pair]) -> list[Held]: ...

    async def change(self, values: Sequence[tuple[Pair, int]], *, add: bool,
                     idempotency: tuple[str, str, str, str] | None = None) -> bool: ...

    async def usage(self, start: str, end: str, user_id: str | None) -> list[UsageSum]: ...


async def open_quota(config: QuotaHandlersConfig | None, turn_db: Database,
                     turn_db_config: DatabaseConfig) -> QuotaService:
    """The configured service: on the turn database when `quota_handlers` names the
    same one (charge and record share a transaction), else on its own."""
    storage = config.storage if config is not None else None
    if config is None or storage is None or not config.limiters:
        return QuotaOff()
    if same_database(storage, turn_db_config):
        db, shares = turn_db, True
    else:
        try:
            db = await open_database(storage)
        except DatabaseUnavailable as exc:
            raise DatabaseUnavailable(str(exc).replace("database.", "quota_handlers.", 1)) from None
        shares = False
    # One writer process (SQLite alone): admission in memory, written through. Several
    # replicas (PostgreSQL) or workers on one SQLite file: admission in the database,
    # on this process's holds.
    strategy: type[LimitedQuota] = HoldsQuota if db.shared else LedgerQuota
    service = strategy(config, db, shares_turn_database=shares, owns_db=not shares)
    await service.sync_clock()
    return service
