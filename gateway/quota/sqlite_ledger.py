"""Quotas on SQLite (`LedgerQuota`), for a process alone on its file (workers sharing
one take the holds: `postgres_holds.py` with `sqlite_holds.py`'s statements): this
process is the file's one writer, so admission
is decided in memory by the ledger (`ledger.py`: balances loaded once, reserved with
no await between the check and the reservation, every change written through as a
relative update), and reservations live in the process.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from gateway.config.quota import QuotaHandlersConfig
from gateway.identity import Identity
from gateway.quota.balances import Held, Pair
from gateway.quota.ledger import Balance, Ledger
from gateway.quota.limited import UNREACHABLE, LimitedQuota
from gateway.quota.reservation import Charge, Reservation, estimate, output_tokens
from gateway.quota.store import Usage, charge_rows, usage_rows
from gateway.schema.errors import ApiError
from gateway.storage.batch import Keyed, in_lock_order
from gateway.storage.database import Database


class LedgerQuota(LimitedQuota):
    def __init__(self, config: QuotaHandlersConfig, db: Database, shares_turn_database: bool = False,
                 owns_db: bool = False):
        super().__init__(config, db, shares_turn_database, owns_db)
        self._ledger = Ledger(self.store)

    async def reserve(self, identity: Identity, raw: Any) -> Reservation:
        need = estimate(raw, self.config.output_reservation)
        reservation = Reservation(identity.user_id, need, self.pairs(identity.user_id),
                                  output=output_tokens(raw, self.config.output_reservation))
        ledger = self._ledger
        outcome = None
        if (balances := ledger.lookup(reservation.user_id, reservation.pairs)) is not None:
            outcome = ledger.reserve(balances, need, time.time() + self._offset, self.now)
            if outcome[0] is None and not outcome[1]:   # in memory, nothing due, room: no await at all
                reservation.balances = balances
                return reservation
        try:
            return await self._reserve_locally(reservation, balances, outcome)
        except ApiError:
            raise
        except UNREACHABLE as exc:
            raise self._unreachable(exc) from None

    async def extend(self, reservation: Reservation, tokens: int) -> None:
        """More tokens on the reservation's balances (the ledger's, kept while it lives:
        never evicted), or 429."""
        ledger = self._ledger
        try:
            if any(balance.stale for balance in reservation.balances):   # re-read in place (`Ledger.load`)
                await ledger.load(reservation.user_id, reservation.pairs, self.now())
            outcome = ledger.reserve(reservation.balances, tokens, time.time() + self._offset, self.now)
            extra = Reservation(reservation.user_id, tokens, reservation.pairs)
            await self._reserve_locally(extra, reservation.balances, outcome)
        except ApiError:
            raise
        except UNREACHABLE as exc:
            raise self._unreachable(exc) from None
        reservation.tokens += tokens

    async def _reserve_locally(self, reservation: Reservation, balances: tuple[Balance, ...] | None,
                               outcome: tuple[Held | None, list[Keyed]] | None) -> Reservation:
        """Admission by the ledger, from loading the balances (`balances` None) or from
        what `ledger.reserve` did with them (`outcome`: a refusal, top-ups to write)."""
        ledger = self._ledger
        if balances is None or outcome is None:
            balances = await ledger.load(reservation.user_id, reservation.pairs, self.now())
            outcome = ledger.reserve(balances, reservation.tokens, time.time() + self._offset, self.now)
        refused, top_ups = outcome
        if top_ups:  # once per period and subject: persisted before the turn goes on
            try:
                await self._write(top_ups)
            except BaseException:
                ledger.forget(balances)
                if refused is None:
                    ledger.settle(balances, reservation.tokens, 0)
                raise
        if refused is not None:
            raise self._refusal(refused, reservation.tokens, self.now())
        reservation.balances = balances
        return reservation

    async def _write(self, statements: Sequence[Keyed]) -> None:
        await self.store.db.write(in_lock_order(statements))

    def _end(self, reservation: Reservation, tokens: int, usage: Usage | None) -> Charge:
        self._ledger.settle(reservation.balances, reservation.tokens, tokens)
        return Charge(reservation, tokens, usage)

    def forget(self, reservation: Reservation | None) -> None:
        """A charge could not be written: the ledger reads the balances again."""
        if reservation is not None:
            self._ledger.forget(reservation.balances)

    def statements(self, charges: Sequence[Charge]) -> list[Keyed]:
        """One statement per balance row the charges change, one per usage row."""
        tokens: dict[tuple[str, str], int] = {}     # by (limiter name, subject)
        for charge in charges:
            for balance in charge.reservation.balances:
                tokens[balance.key] = tokens.get(balance.key, 0) + charge.tokens
        statements = charge_rows(tokens)
        if self._history:
            statements += usage_rows(charge.usage for charge in charges)
        return statements

    async def _available(self, user_id: str, pairs: tuple[Pair, ...]) -> Sequence[int]:
        values = Ledger.available(await self._ledger.load(user_id, pairs, self.now()), time.time() + self._offset,
                                  self.now)
        assert values is not None   # just loaded: none stale
        return values

    def settled(self, reservation: Reservation) -> dict[str, int] | None:
        """From the ledger's balances the reservation kept."""
        values = Ledger.available(reservation.balances, time.time() + self._offset, self.now) \
            if reservation.balances else None
        return self._shown(values) if values is not None else None

    async def held(self, pairs: Sequence[Pair]) -> list[Held]:
        now = self.now()
        return self._ledger.read(await self._ledger.load(None, pairs, now), now)

    async def change(self, values: Sequence[tuple[Pair, int]], *, add: bool,
                     idempotency: tuple[str, str, str, str] | None = None) -> bool:
        """As a relative update (`available + delta`, after any top-up due), which
        commutes with the charges still queued in the turn writer; the ledger's balances
        follow once it is written."""
        now = self.now()
        balances = await self._ledger.load(None, [pair for pair, _ in values], now)
        top_ups: list[Keyed] = []
        deltas = [self._ledger.delta(balance, now, value, add, top_ups) for balance, (_, value) in zip(balances, values)]
        if top_ups:
            await self._write(top_ups)
        applied = await self.store.change([(pair, delta) for (pair, _), delta in zip(values, deltas)], now, add=True,
                                          idempotency=idempotency)
        if applied:
            for balance, delta in zip(balances, deltas):
                self._ledger.shift(balance, delta)
        return applied

