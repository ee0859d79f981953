"""The base of every configuration model: unknown keys fail start-up, naming the key
(docs/architecture.md, decision 5: configuration is LCORE's); the marker of LCORE keys
accepted but not built; and the URL check the sections share."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_NOT_BUILT = "x-not-built"


def not_built(default: Any = None, **constraints: Any) -> Any:
    """The field of an LCORE key this version accepts (an existing file still starts) but
    does not act on: start-up warns when a file sets it (`Configuration.warnings`)."""
    return Field(default, json_schema_extra={_NOT_BUILT: True}, **constraints)


def is_not_built(field: FieldInfo) -> bool:
    extra = field.json_schema_extra
    return isinstance(extra, dict) and extra.get(_NOT_BUILT) is True


def http_url(value: str | None) -> str | None:
    """A URL key's check (None passes: the key is optional)."""
    if value is not None and not re.match(r"^https?://[^/]", value):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value
