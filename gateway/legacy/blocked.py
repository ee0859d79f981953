"""The query stream of a question a shield blocked, as LCORE writes it: `start`, one
`token` (id 0, the shield's message), `end` (no `turn_complete`); with `text/plain`,
the message alone. Sans-I/O; the frames are `LegacyStream`'s own where it has them."""

from __future__ import annotations

import json
from typing import Any

import orjson

from gateway.legacy.stream import LegacyStream


def blocked_stream(legacy: LegacyStream, message: str, available_quotas: dict[str, int]) -> bytes:
    frames = legacy.start() + legacy.delta(orjson.dumps(message))
    if legacy.text:
        return frames
    end: dict[str, Any] = {"referenced_documents": [], "truncated": None, "input_tokens": 0, "output_tokens": 0}
    return frames + b"data: %s\n\n" % json.dumps({"event": "end", "data": end,
                                                  "available_quotas": available_quotas}).encode()
