"""Wire models of the quota API (`/v1/quotas…`): what it returns and what it accepts.
They describe it in `/openapi.json`; the handlers validate request bodies with them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class LimiterBalance(BaseModel):
    name: str
    type: Literal["user_limiter", "cluster_limiter"]
    subject: str = Field(description="The user id, or '' for the cluster")
    available: int = Field(description="The balance, with every elapsed period applied")
    reserved: int = Field(description="Tokens held by turns in progress")
    initial_quota: int
    quota_increase: int
    period: str
    replenish: Literal["increase", "reset", "cap"]
    next_replenishment: str = Field(description="When the next period starts (ISO-8601 UTC)")


class QuotasResponse(BaseModel):
    enforced: bool = Field(description="False when no limiter or no quota storage is configured")
    subject: str = Field(description="The user id, or '' for the cluster")
    available_quotas: dict[str, int] = Field(description="The balances by limiter name, as turns report them")
    limiters: list[LimiterBalance]
    applied: bool | None = Field(None, description="Increments: false when the Idempotency-Key was seen "
                                                   "before (nothing changed)")


class QuotaChange(BaseModel):
    """`PUT` (set) or `POST …/increments` (add): tokens per limiter name."""

    model_config = ConfigDict(extra="forbid")
    limiters: dict[str, int] = Field(description="Limiter name → tokens (set: the new balance, >= 0; "
                                                 "increments: tokens to add, > 0)")


class UsageRow(BaseModel):
    user_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    total_tokens: int
    first_day: str
    last_day: str


class UsageReport(BaseModel):
    start: str = Field(description="First UTC day (YYYY-MM-DD), inclusive")
    end: str = Field(description="Last UTC day (YYYY-MM-DD), inclusive")
    usage: list[UsageRow]
