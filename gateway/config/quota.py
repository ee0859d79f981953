"""The `quota_handlers` section: LCORE's keys (storage, limiters, scheduler, token
history) and the few the gateway adds (`replenish`, `reservation_seconds`,
`output_reservation`). Limiters are enforced only when a storage block is named, as in
LCORE; without one the gateway warns and does not enforce (an existing file keeps its
meaning)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.base import Strict
from gateway.config.database import DatabaseConfig, PostgresConfig, SQLiteConfig
from gateway.config.periods import Period, PeriodError


class QuotaLimiterConfig(Strict):
    name: str = Field(min_length=1)
    type: Literal["user_limiter", "cluster_limiter"]
    initial_quota: int = Field(ge=0)
    quota_increase: int = Field(ge=0)
    period: str
    # Ours. What a period does to the balance: `increase` adds quota_increase without a
    # cap (what LCORE does on PostgreSQL), `reset` sets it to initial_quota, `cap` adds
    # quota_increase but not past initial_quota.
    replenish: Literal["increase", "reset", "cap"] = "increase"

    @field_validator("period")
    @classmethod
    def _period(cls, value: str) -> str:
        try:
            Period.parse(value)
        except PeriodError as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def parsed_period(self) -> Period:
        return Period.parse(self.period)


class QuotaSchedulerConfig(Strict):
    """LCORE's scheduler: here it only bounds how late a balance is topped up and how
    often expired reservations are swept (replenishment itself is computed from stored
    timestamps); the reconnection keys are accepted for compatibility."""

    period: int = Field(1, gt=0)
    database_reconnection_count: int = Field(10, ge=0)
    database_reconnection_delay: int = Field(1, ge=0)


class QuotaHandlersConfig(Strict):
    sqlite: SQLiteConfig | None = None
    postgres: PostgresConfig | None = None
    limiters: list[QuotaLimiterConfig] = []
    scheduler: QuotaSchedulerConfig = QuotaSchedulerConfig()
    enable_token_history: bool = False
    # Ours: how long a reservation counts against a balance if its turn never settles
    # (a replica that died mid-turn); a turn that outlives it is still charged.
    reservation_seconds: int = Field(600, gt=0)
    # Ours: the output tokens reserved for a request without `max_output_tokens`.
    output_reservation: int = Field(1024, ge=0)

    @model_validator(mode="after")
    def _valid(self) -> "QuotaHandlersConfig":
        if self.sqlite and self.postgres:
            raise ValueError("configure at most one of sqlite and postgres")
        names = [limiter.name for limiter in self.limiters]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise ValueError(f"limiters[{index}].name: {name!r} is used by another limiter; each limiter "
                                 "needs its own name (it keys its balances and available_quotas)")
        return self

    @property
    def storage(self) -> DatabaseConfig | None:
        """The database the balances live in; None: limiters are not enforced."""
        if self.sqlite is None and self.postgres is None:
            return None
        return DatabaseConfig(sqlite=self.sqlite, postgres=self.postgres)

    @property
    def enforced(self) -> bool:
        return self.storage is not None and bool(self.limiters)

    def warnings(self) -> list[str]:
        if self.limiters and self.storage is None:
            return ["quota_handlers: limiters are configured without sqlite or postgres storage; as in LCORE "
                    "they are not enforced"]
        return []


def same_database(a: DatabaseConfig, b: DatabaseConfig) -> bool:
    """Whether two database blocks name the same database (then a turn's charge and its
    record are one transaction)."""
    if a.postgres is not None or b.postgres is not None:
        if a.postgres is None or b.postgres is None:
            return False
        keys = ("host", "port", "db", "namespace")
        return all(getattr(a.postgres, key) == getattr(b.postgres, key) for key in keys)
    return Path(a.sqlite_path).resolve() == Path(b.sqlite_path).resolve()
