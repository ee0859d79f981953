"""A stream event as the hot path carries it (docs/architecture.md,
decision 2: the hot path does not parse what it does not change).

An upstream event stays its raw JSON bytes plus its `type`. It is parsed only when a
stage needs to read or change it (`event.data`); once parsed, it is re-serialised on
output. Renumbering `sequence_number` does not need a parse: the digits are patched in
the bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from gateway.schema.json_types import JsonObject

# orjson sizes the tree it parses into from the document first: at its peak ~13 times a
# large document (26 MiB for a terminal event with 2 MiB of text; issue 42). The standard
# library's parser keeps ~2 times; events this large (rare) are parsed by it instead.
_LARGE = 1 << 20


def loads(raw: bytes) -> Any:
    """An event's JSON, parsed (orjson's errors either way)."""
    if len(raw) < _LARGE:
        return orjson.loads(raw)
    try:
        return json.loads(raw)
    except ValueError as exc:   # JSONDecodeError, UnicodeDecodeError
        raise orjson.JSONDecodeError(str(exc), "", 0) from None


# `response.requires_action` ends a local-engine response whose function calls the
# client runs (`inference.client_tool_status: requires_action`, spec 002).
RESPONSE_EVENTS = frozenset({"response.created", "response.queued", "response.in_progress",
                             "response.completed", "response.incomplete", "response.failed",
                             "response.requires_action"})
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed",
                             "response.requires_action"})

_SEQ_KEY = b'"sequence_number":'
_SEQ_DIGITS = re.compile(rb'"sequence_number":(\d+)')


class Event:
    __slots__ = ("type", "raw", "_data")

    def __init__(self, type: str, raw: bytes | None = None, data: dict[str, Any] | None = None):
        self.type = type
        self.raw = raw
        self._data = data

    @classmethod
    def build(cls, data: JsonObject) -> "Event":
        """An event the gateway made itself (no upstream bytes)."""
        return cls(data.get("type", ""), None, data)

    @property
    def parsed(self) -> bool:
        return self._data is not None

    @property
    def data(self) -> JsonObject:
        """The event as a dict; parsing marks it for re-serialisation."""
        if self._data is None:
            assert self.raw is not None   # an event without its dict has its bytes
            value = loads(self.raw)
            self._data = value if isinstance(value, dict) else {"value": value}
        return self._data

    def payload(self, sequence_number: int) -> bytes:
        """The JSON bytes to send, carrying the given sequence_number."""
        if self._data is None:
            assert self.raw is not None   # an event without its dict has its bytes
            patched = _patch_sequence(self.raw, sequence_number)
            if patched is not None:
                return patched
        data = self.data
        data["sequence_number"] = sequence_number
        return orjson.dumps(data)

    def __repr__(self) -> str:
        return f"Event({self.type!r}, parsed={self.parsed})"


class Framed(Event):
    """An event the gateway made as a whole SSE frame (`event:` line, `data:` line with
    its `sequence_number` in place): the local engine's text deltas, written as they
    are when `number` is the stream's next."""

    __slots__ = ("number",)
    raw: bytes   # always its frame

    def __init__(self, type: str, frame: bytes, number: int):
        # No super().__init__: this is made once per streamed text piece.
        self.type = type
        self.raw = frame
        self._data = None
        self.number = number

    @property
    def data(self) -> JsonObject:
        if self._data is None:
            frame = self.raw
            assert frame is not None
            self._data = loads(frame[frame.index(b"\ndata: ") + 7:])
        return self._data

    def payload(self, sequence_number: int) -> bytes:
        data = self.data
        data["sequence_number"] = sequence_number
        return orjson.dumps(data)


def _patch_sequence(raw: bytes, number: int) -> bytes | None:
    """Replace the digits after `"sequence_number":`, or None if they are not there or
    the key occurs more than once (a nested object has one too: only a parse tells
    which is the event's own).

    Only events that are never parsed come here (deltas and the like). Text inside a
    string escapes its quotes, so it can never spell the key.
    """
    match = _SEQ_DIGITS.search(raw)
    if match is None or raw.count(_SEQ_KEY) != 1:
        return None
    return b"%s%d%s" % (raw[:match.start(1)], number, raw[match.end(1):])
