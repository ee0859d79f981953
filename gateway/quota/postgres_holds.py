"""Quotas on PostgreSQL, or on a SQLite file several workers share (`HoldsQuota`,
its SQLite statements in `sqlite_holds.py`): several replicas share the balances, so
admission is a statement, shared by the turns that ask together (`admission.py`), that
reserves on this replica's holds (`holds.py`), whose spare admits later turns in memory.
A batch of turns' charges is one statement, which returns the balances after it, so the
batch's turns answer `available_quotas` without reading them. Every scheduler period
this replica's spare is given back and the holds of replicas that stopped are swept.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Sequence

from gateway.config.quota import QuotaHandlersConfig
from gateway.identity import Identity
from gateway.quota.admission import Admissions
from gateway.quota.balances import Held, Pair
from gateway.quota.holds import Holds
from gateway.quota.limited import UNREACHABLE, LimitedQuota
from gateway.quota.reservation import Charge, Reservation, estimate, output_tokens
from gateway.quota.sqlite_holds import SQLiteHoldsStore
from gateway.quota.store import usage_rows
from gateway.schema.errors import ApiError, quota_storage_unavailable
from gateway.storage.batch import Keyed
from gateway.storage.database import Database, Row
from gateway.user_ids import logged_user

log = logging.getLogger("gateway.quota")

_ATTEMPTS = 3  # admission tries (a top-up can fall due between two)


class HoldsQuota(LimitedQuota):
    def __init__(self, config: QuotaHandlersConfig, db: Database, shares_turn_database: bool = False,
                 owns_db: bool = False):
        super().__init__(config, db, shares_turn_database, owns_db)
        if db.dialect == "sqlite":   # several worker processes on one file (`storage/sharing.py`)
            self.store = SQLiteHoldsStore(db)
        self._holds = Holds(uuid.uuid4().hex[:16] + "-")   # hold row ids: this process's prefix and a count
        self._admissions = Admissions(self.store, self._holds, self.now, config.reservation_seconds, self.release)
        self._after_batch: dict[tuple[str, str], int] = {}   # balances read after the last writer batch

    async def _closing(self) -> None:
        """Delete this replica's hold rows, so a restart leaves nothing reserved."""
        if len(self._holds):
            try:
                await self._admissions.give_back(self._holds.forget_all())
            except Exception as exc:   # they expire after reservation_seconds instead
                log.warning("deleting this replica's quota holds at shutdown failed: %s", exc)

    async def reserve(self, identity: Identity, raw: Any) -> Reservation:
        need = estimate(raw, self.config.output_reservation)
        return await self._admit(Reservation(identity.user_id, need, self.pairs(identity.user_id),
                                             output=output_tokens(raw, self.config.output_reservation)))

    async def extend(self, reservation: Reservation, tokens: int) -> None:
        """Admitted as a turn of its own on the same holds, then merged: the holds are
        this replica's objects per balance, kept while the turn uses them."""
        extra = await self._admit(Reservation(reservation.user_id, tokens, reservation.pairs))
        if len(extra.holds) != len(reservation.holds) or any(
                a is not b for a, b in zip(extra.holds, reservation.holds)):
            await self.release(extra)   # a hold was replaced meanwhile (a sweep): refuse, fail closed
            raise quota_storage_unavailable()
        reservation.tokens += tokens

    async def _admit(self, reservation: Reservation) -> Reservation:
        need = reservation.tokens
        if (holds := self._holds.admit(reservation.pairs, need, time.time() + self._offset)) is not None:
            reservation.holds = holds   # the spare of this replica's holds covers it: no await at all
            return reservation
        try:
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
        except UNREACHABLE as exc:
            raise self._unreachable(exc) from None
        log.error("quota admission of %s did not settle after %d attempts", logged_user(reservation.user_id),
                  _ATTEMPTS)
        raise quota_storage_unavailable()

    def forget(self, reservation: Reservation | None) -> None:
        """A charge could not be written: the turn's tokens stay held, as spare
        (`Reservation.end`), until the scheduler gives them back."""
        if reservation is not None:
            reservation.end(released=False)

    def statements(self, charges: Sequence[Charge]) -> list[Keyed]:
        """One statement for every balance row the charges change and what their holds
        release; one per usage row."""
        tokens: dict[tuple[str, str], int] = {}       # by (limiter name, subject)
        released: dict[tuple[str, str], int] = {}     # hold rows: (id, limiter name)
        for charge in charges:
            reservation = charge.reservation
            for limiter, subject in reservation.pairs:
                key = (limiter.name, subject)
                tokens[key] = tokens.get(key, 0) + charge.tokens
            for hold in reservation.holds:
                key = (hold.id, hold.limiter)
                released[key] = released.get(key, 0) + reservation.tokens
        statements = self.store.charges(tokens, released)
        if self._history:
            statements += usage_rows(charge.usage for charge in charges)
        return statements

    def _ended(self, charges: Sequence[Charge]) -> None:
        for charge in charges:
            charge.reservation.end(released=True)

    async def committed(self, charges: Sequence[Charge], rows: Sequence[Row] = ()) -> None:
        """After a writer batch: the balances its charges changed, as the batch's charge
        statement returned them (`rows`), else read in one query; its turns answer
        `available_quotas` from them (`settled`): one read per batch, not per turn."""
        self._ended(charges)
        returned = self.store.held_from(rows, self._named, self.now())
        if returned:
            self._after_batch = {(held.limiter.name, held.subject): held.state.available for held in returned}
            return
        pairs: dict[tuple[str, str], Pair] = {}   # by (name, subject): a limiter's config is not hashable
        for charge in charges:
            for limiter, subject in charge.reservation.pairs:
                pairs[(limiter.name, subject)] = (limiter, subject)
        if pairs:
            read = await self.store.read(list(pairs.values()), self.now())
            self._after_batch = {(held.limiter.name, held.subject): held.state.available for held in read}

    async def _available(self, user_id: str, pairs: tuple[Pair, ...]) -> Sequence[int]:
        return [held.state.available for held in await self.held(pairs)]

    def settled(self, reservation: Reservation) -> dict[str, int] | None:
        """As read after the writer's batch that charged it (or a later one)."""
        return self._after_batch_for(reservation.pairs)

    def _after_batch_for(self, pairs: tuple[Pair, ...]) -> dict[str, int] | None:
        found = self._after_batch
        try:
            values = [found[(limiter.name, subject)] for limiter, subject in pairs]
        except KeyError:
            return None
        return self._shown(values)

    async def available_after_batch(self, user_id: str) -> dict[str, int]:
        """`available()`, from the balances read after the writer's last batch when it
        charged them."""
        found = self._after_batch_for(self.pairs(user_id))
        return found if found is not None else await self.available(user_id)

    async def held(self, pairs: Sequence[Pair]) -> list[Held]:
        return await self.store.read(pairs, self.now())

    async def _tick(self) -> None:
        await self.give_back_holds()
        swept = await self.store.sweep(self.now())
        if swept:
            log.warning("released expired quota holds (a replica that stopped) on %d balances", swept)

    async def give_back_holds(self) -> None:
        """The scheduler's period: this replica's spare given back, idle holds deleted,
        the others renewed (`Holds.tick`)."""
        await self._admissions.give_back(self._holds.tick())
