"""A request body read as JSON, or FastAPI's 422 for one that cannot be.

A body that is not JSON is one `json_invalid` error at the `json` module's position, an
empty body one `missing` error, as FastAPI gives them. A JSON number Python cannot
convert (an integer of more than 4,300 digits) is the same `json_invalid` 422 as any
other number orjson refuses.

A body nested deeper than `MAX_JSON_DEPTH` arrays and objects is refused the same way,
a `json_invalid` error at position 0 whose `ctx.error` says so: orjson reads at most
1,024 levels and writes at most 254, and the gateway re-encodes what a client sends a
few levels deeper than it came (a stream event wraps the response object that echoes
the tools), so a deeper body would fail after the turn created its conversation.
(FastAPI has no limit of its own: Python's recursion limit answers a 500.)

A refusal costs what the request cost: a body with more than `service.max_json_items`
arrays, objects and items is refused before it is decoded (`too_many_items`, which the
WebSocket's messages are counted with too).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from gateway.schema.error_list import request_validation_error
from gateway.schema.errors import ApiError

# Arrays and objects a body may nest (the top-level object is level 1). orjson writes
# at most _ORJSON_WRITES levels; the rest is room for what the gateway wraps around a
# client's values when it re-encodes them.
MAX_JSON_DEPTH = 200
_ORJSON_WRITES = 254
_TOO_DEEP = (f"nesting depth limit exceeded: arrays and objects may nest at most {MAX_JSON_DEPTH} levels "
             "deep")

# Arrays, objects and the commas between items a body may hold (`service.max_json_items`'s
# default): far past any real request, it bounds what decoding one builds (~10 MB).
MAX_JSON_ITEMS = 200_000
# A JSON string (the unrolled form: no backtracking over long strings).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def parse_json_body(body: bytes, max_items: int = MAX_JSON_ITEMS) -> Any:
    """The decoded body, or the 422 FastAPI gives for an empty or undecodable one, or
    for one holding more than `max_items` arrays, objects and items
    (`service.max_json_items`), counted before it is decoded."""
    if not body:
        raise request_validation_error([{"type": "missing", "loc": ["body"], "msg": "Field required",
                                         "input": None}])
    if too_many_items(body, max_items):
        raise _json_invalid(0, f"too many items: a body may hold at most {max_items} arrays, objects and items "
                               "in them")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as fast_error:
        if str(fast_error).startswith("depth limit exceeded"):   # past orjson's 1,024 levels
            raise _json_invalid(0, _TOO_DEEP) from None
        # The error path only: the standard module gives FastAPI's position and message.
        try:
            json.loads(body)
        except json.JSONDecodeError as exc:
            position, message = exc.pos, exc.msg
        except UnicodeDecodeError as exc:
            position, message = exc.start, "Invalid UTF-8"
        except ValueError:
            # An integer past Python's int_max_str_digits (4,300): a number orjson
            # refused too (it reads it as an infinite double), refused as below.
            position, message = 0, str(fast_error)
        except RecursionError:   # deep and malformed: Python's recursion limit
            position, message = 0, _TOO_DEEP
        else:
            # Valid for `json` but not for orjson (NaN, integers beyond 64 bits): the
            # gateway cannot forward it faithfully, so it is refused the same way.
            position, message = 0, str(fast_error)
        raise _json_invalid(position, message) from None
    if _too_deep(body, data):
        raise _json_invalid(0, _TOO_DEEP)
    return data


def too_many_items(data: bytes | str, limit: int) -> bool:
    """Whether the body (or a WebSocket's text message) holds more than `limit` arrays,
    objects and separators between items (outside strings). Decoding builds an object
    per item: 10 MB of `{},` is 3.3 million dicts, 300 MB. Three C-speed counts decide
    nearly every body (on a str itself: no copy); past the limit, its strings are cut
    out (one C-speed pass, a copy at most the body's size) and the rest counted again."""
    if isinstance(data, str):
        if data.count(",") + data.count("{") + data.count("[") <= limit:
            return False
        body = data.encode()
    else:
        body = data
    if body.count(b",") + body.count(b"{") + body.count(b"[") <= limit:
        return False
    # Each item or member holds at most two strings, and the count is at least the
    # items and members: many strings are over the limit without cutting them out.
    strings = (body.count(b'"') - body.count(b'\\"')) // 2
    if (strings - 1) // 2 > limit:
        return True
    bare = _STRING.sub(b"", body)
    return bare.count(b",") + bare.count(b"{") + bare.count(b"[") > limit


def _too_deep(body: bytes, data: Any) -> bool:
    """Whether the decoded body nests past MAX_JSON_DEPTH. A body with no more brackets
    than that cannot (two C-speed counts, ~1 µs for 2 KB: nearly every body stops
    here); else orjson writes it wrapped in enough lists to fail exactly past the limit
    (one C-speed encoding, no Python walk over a large body)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False
    for _ in range(_ORJSON_WRITES - MAX_JSON_DEPTH):
        data = [data]
    try:
        orjson.dumps(data)
    except orjson.JSONEncodeError:   # "Recursion limit reached": nothing else fails on what orjson read
        return True
    return False


def _json_invalid(position: int, message: str) -> ApiError:
    return request_validation_error([{"type": "json_invalid", "loc": ["body", position], "msg": "JSON decode error",
                                      "input": {}, "ctx": {"error": message}}])
