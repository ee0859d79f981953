"""The base of every configuration model: unknown keys fail start-up, naming the key
(DESIGN decision 5); and the URL check the sections share."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def http_url(value: str | None) -> str | None:
    """A URL key's check (None passes: the key is optional)."""
    if value is not None and not re.match(r"^https?://[^/]", value):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value
