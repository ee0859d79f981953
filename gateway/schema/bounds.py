"""The size every error body stays under, whatever the request (issue 39).

An error that echoes what the client sent (a validation entry's `input`, a `loc`
through a union of many models, a message quoting a value) could answer a small body
with a huge one: 3 KB of `{}` input items was a 14 MB 422. So everything an error
renders is bounded here, in encoded bytes: strings are clipped (`clip`) and echoed
values cut to a prefix (`preview`), each in O(its bound), never O(the request). The
error list itself is capped where it is built (`error_list.request_validation_error`),
and `ApiError` clips its own strings, so no error body is larger than
`MAX_ERROR_BODY_BYTES`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# No error body the gateway renders is larger (tests walk every route to check it).
MAX_ERROR_BODY_BYTES = 64 * 1024
# What marks a cut: a clipped string ends with it; a list cut short ends with a string
# saying how many items are not shown, an object with this key giving how many keys.
CUT = "…"


def json_size(text: str) -> int:
    """Bytes of `text` as a JSON string (orjson's UTF-8; an upper bound for the rare
    string orjson cannot write)."""
    try:
        return len(orjson.dumps(text))
    except orjson.JSONEncodeError:   # lone surrogates: the ASCII-escaped form is never shorter
        return len(json.dumps(text))


def clip(text: str, limit: int) -> str:
    """`text` when it encodes to at most `limit` bytes, else its longest prefix that
    does with `CUT` appended. Reads at most `limit` characters of it."""
    if len(text) * 6 + 2 <= limit:   # \\uXXXX is the longest a character encodes to
        return text
    if len(text) <= limit and json_size(text) <= limit:
        return text
    room = limit - json_size(CUT) + 2
    keep = min(len(text), max(room - 2, 0))
    while keep > 0 and json_size(text[:keep]) > room:
        keep = keep * 3 // 4
    return text[:keep] + CUT


def preview(value: Any, limit: int) -> Any:
    """`value` itself when its JSON is at most `limit` bytes; else a prefix of it that
    fits: strings clipped, lists and objects cut short with a note of what is left out.
    The cost is O(limit), however large `value` is."""
    if _size_within(value, limit) <= limit:
        return value
    shown, size = _cut(value, limit)
    return shown if size <= limit else CUT


def _scalar_size(value: Any) -> int:
    if isinstance(value, str):
        return json_size(value)
    try:
        return len(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        return len(json.dumps(str(value)))


def _size_within(value: Any, limit: int) -> int:
    """The JSON size of `value`, or some number past `limit` as soon as it is past it."""
    if isinstance(value, str):
        return limit + 1 if len(value) > limit else json_size(value)
    if isinstance(value, dict):
        size = 2 + max(len(value) - 1, 0)
        for key, item in value.items():
            if size > limit:
                return size
            size += _size_within(str(key), limit) + 1 + _size_within(item, limit)
        return size
    if isinstance(value, (list, tuple)):
        size = 2 + max(len(value) - 1, 0)
        for item in value:
            if size > limit:
                return size
            size += _size_within(item, limit)
        return size
    return _scalar_size(value)


def _cut(value: Any, limit: int) -> tuple[Any, int]:
    """A prefix of `value` whose JSON is at most about `limit` bytes, and its size."""
    if isinstance(value, str):
        shown = clip(value, max(limit, 8))
        return shown, json_size(shown)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        size = 2
        for index, (key, item) in enumerate(value.items()):
            room = limit - size - 24   # a comma, and the note of the keys left out
            name = clip(str(key), max(min(room // 2, 256), 8))
            if room < 16 or name in out:
                out[CUT] = len(value) - index
                return out, size + 1 + json_size(CUT) + 1 + len(str(len(value) - index))
            shown, used = _cut(item, room - json_size(name) - 1)
            out[name] = shown
            size += (1 if index else 0) + json_size(name) + 1 + used
        return out, size
    if isinstance(value, (list, tuple)):
        items: list[Any] = []
        size = 2
        for index, item in enumerate(value):
            room = limit - size - 24
            if room < 8:
                note = f"{CUT} {len(value) - index} more"
                items.append(note)
                return items, size + 1 + json_size(note)
            shown, used = _cut(item, room)
            items.append(shown)
            size += (1 if index else 0) + used
        return items, size
    return value, _scalar_size(value)
