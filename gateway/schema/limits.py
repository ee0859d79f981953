"""The operator's caps on how many items a request's lists hold, checked on the decoded
JSON before anything validates them one by one (issue 39).

Validation costs per item, and an item a union refuses costs one error per branch (an
input item: 27): an uncapped list let a 30 KB body take 6 s of the event loop. A list
past its cap is one pydantic `too_long` entry in FastAPI's 422 (the field in `loc`, the
cap in `msg` and `ctx`), answered in O(1) whatever the list holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from gateway.schema.error_list import request_validation_error


@dataclass(frozen=True)
class RequestLimits:
    """`service.max_input_items`, `max_tools`, `max_include_entries`, `max_attachments`
    (the defaults are the configuration's)."""

    input_items: int = 1000
    tools: int = 128
    include: int = 32
    attachments: int = 100

    def responses(self) -> tuple[tuple[str, int], ...]:
        """The caps of a Responses request (`/v1/responses`, its WebSocket, the turns
        the other endpoints make)."""
        return (("input", self.input_items), ("tools", self.tools), ("include", self.include))

    def query(self) -> tuple[tuple[str, int], ...]:
        """The caps of LCORE's `QueryRequest` (`/v1/query`, `/v1/streaming_query`)."""
        return (("attachments", self.attachments),)


def check_counts(raw: Any, caps: Iterable[tuple[str, int]]) -> None:
    """LCORE's 422 for the first top-level list of `raw` longer than its cap (a value
    that is not a list is left to validation to refuse)."""
    if not isinstance(raw, dict):
        return
    for field, cap in caps:
        value = raw.get(field)
        if isinstance(value, list) and len(value) > cap:
            raise request_validation_error([{
                "type": "too_long", "loc": ["body", field],
                "msg": f"List should have at most {cap} items after validation, not {len(value)}",
                "input": value, "ctx": {"field_type": "List", "max_length": cap, "actual_length": len(value)}}])
