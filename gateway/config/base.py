"""The base of every configuration model: unknown keys fail start-up, naming the key
(DESIGN decision 5)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
