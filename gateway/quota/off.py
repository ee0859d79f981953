"""No quotas (`QuotaOff`): no limiter configured, or no storage named for them (LCORE
only warns). Nothing is checked or charged; `available_quotas` is empty."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from gateway.config.quota import QuotaLimiterConfig
from gateway.identity import Identity
from gateway.quota.balances import Held, Pair
from gateway.quota.reservation import Charge, Reservation
from gateway.quota.store import UsageSum

_NO_RESERVATION = "no turn holds a reservation when quotas are off"


class QuotaOff:
    enabled = False
    shares_turn_database = False
    batch = None

    def __init__(self) -> None:
        self.limiters: list[QuotaLimiterConfig] = []

    def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def pairs(self, user_id: str) -> tuple[Pair, ...]:
        return ()

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    async def reserve(self, identity: Identity, raw: Any) -> None:
        return None

    async def extend(self, reservation: Reservation, tokens: int) -> None:
        raise RuntimeError(_NO_RESERVATION)

    def charge(self, reservation: Reservation, input_tokens: int, output_tokens: int, model: str | None,
               provider: str | None) -> Charge:
        raise RuntimeError(_NO_RESERVATION)

    async def write(self, *charges: Charge) -> None:
        if charges:
            raise RuntimeError(_NO_RESERVATION)

    async def release(self, reservation: Reservation, charge: int = 0) -> None:
        raise RuntimeError(_NO_RESERVATION)

    def forget(self, reservation: Reservation | None) -> None:
        pass

    def settled(self, reservation: Reservation) -> dict[str, int] | None:
        return {}

    async def available(self, user_id: str) -> dict[str, int]:
        return {}

    async def held(self, pairs: Sequence[Pair]) -> list[Held]:
        return []

    async def change(self, values: Sequence[tuple[Pair, int]], *, add: bool,
                     idempotency: tuple[str, str, str, str] | None = None) -> bool:
        raise RuntimeError("no limiter to change when quotas are off")

    async def usage(self, start: str, end: str, user_id: str | None) -> list[UsageSum]:
        return []
