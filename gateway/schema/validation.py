"""Request-body validation errors exactly as FastAPI renders them for LCORE.

LCORE's request models are validated by FastAPI: `TypeAdapter(Model).validate_python(
body, from_attributes=True)`, then `errors(include_url=False)` with every `loc` prefixed
by `"body"`, and exception objects in `ctx` rendered as `{}` by `jsonable_encoder`. A
body that is not JSON is one `json_invalid` error at the `json` module's position, an
empty body one `missing` error. Reproducing that here lets LCORE clients that compare
bodies keep working without FastAPI.

A body nested deeper than `MAX_JSON_DEPTH` arrays and objects is refused the same way,
a `json_invalid` error at position 0 whose `ctx.error` says so: orjson reads at most
1,024 levels and writes at most 254, and the gateway re-encodes what a client sends a
few levels deeper than it came (a stream event wraps the response object that echoes
the tools), so a deeper body would fail after the turn created its conversation.
(FastAPI has no limit of its own: Python's recursion limit answers a 500.)

An error list is bounded (issue 39): LCORE's exact entries first, at most `MAX_ERRORS`
of them and `ERRORS_BUDGET` bytes, then one `too_many_errors` entry saying how many
more there were; each entry's `input`, `loc`, `msg` and `ctx` cut to a bounded size
(`schema/bounds.py`). An item of the Responses input union alone is 27 entries with a
400-character `loc`, the first echoing the whole input: unbounded, 3 KB of `{}` items
was a 14 MB answer. A JSON number Python cannot convert (an integer of more than 4,300
digits) is the same `json_invalid` 422 as any other number orjson refuses.

A refusal costs what the request cost: a body with more than `service.max_json_items`
arrays, objects and items is refused before it is decoded, and validation stops at
each list's first bad item (`validate`).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Sequence, TypeVar, cast

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

from gateway.schema.bounds import clip, preview
from gateway.schema.errors import ApiError

Model = TypeVar("Model", bound=BaseModel)

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

_CODES = {"missing": "missing_required_parameter", "extra_forbidden": "unknown_parameter",
          "json_invalid": "invalid_json", "too_long": "array_above_max_length"}

# The entries an error list shows (LCORE's longest recorded list has 40) and the bytes
# they may take; past either, one `too_many_errors` entry says how many are left out.
MAX_ERRORS = 50
ERRORS_BUDGET = 48 * 1024
# The bytes one entry's parts may take: LCORE's longest `loc` is 478 (a union's label
# alone 396), its longest `msg` 248, its longest echoed `input` 122.
_LOC_BYTES = 1024
_LOC_PART_BYTES = 448
_MSG_BYTES = 512
_INPUT_BYTES = 512
_CTX_BYTES = 512
_TYPE_BYTES = 64


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


def too_many_items(body: bytes, limit: int) -> bool:
    """Whether the body holds more than `limit` arrays, objects and separators between
    items (outside strings). Decoding builds an object per item: 10 MB of `{},` is
    3.3 million dicts, 300 MB. Three C-speed counts decide nearly every body; past the
    limit, its strings are cut out (one C-speed pass, a copy at most the body's size)
    and the rest counted again."""
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


def validate(adapter: TypeAdapter[Model], data: Any, context: dict[str, Any] | None = None) -> Model:
    """Validate like FastAPI does, or raise the 422 with its error list (bounded).

    Every list and dict of the model stops at its first bad item (`fail_fast`, on a
    copy of its schema), so a refusal costs O(the schema), not O(the body): a valid
    body validates exactly as before. A refused body of at most `EXACT_VALUES` JSON
    values is validated again in full for LCORE's exact list; a larger one answers the
    errors the fail-fast pass found."""
    dropped = 0
    if isinstance(data, dict) and len(data) > _MAX_TOP_LEVEL_KEYS:
        # No request model has this many fields: every key past them is one more
        # `extra_forbidden` error, each built before any is shown.
        dropped = len(data) - _MAX_TOP_LEVEL_KEYS
        data = dict(itertools.islice(data.items(), _MAX_TOP_LEVEL_KEYS))
    try:
        # The fail-fast copy of the adapter's own schema: it builds the adapter's type.
        return cast(Model, _fail_fast(adapter).validate_python(data, from_attributes=True, context=context))
    except ValidationError as fast:
        refusal = _exact_refusal(adapter, data, context) if _values_within(data, EXACT_VALUES) else None
        refusal = refusal or fast
        raise request_validation_error(fastapi_errors(refusal, MAX_ERRORS), refusal.error_count() + dropped) from None


def _exact_refusal(adapter: TypeAdapter[Any], data: Any, context: Any) -> ValidationError | None:
    """The full validator's errors for a small body the fail-fast pass refused (LCORE's
    exact list)."""
    try:
        adapter.validate_python(data, from_attributes=True, context=context)
    except ValidationError as exact:
        return exact
    return None


# A refused body with at most this many JSON values is validated in full (LCORE's exact
# list): at most ~27 errors a value (an input item no branch accepts), so a few thousand.
# A larger one gets the fail-fast list, which is LCORE's too unless a list holds more
# than one bad item (it shows the first of each).
EXACT_VALUES = 500
_MAX_TOP_LEVEL_KEYS = 256
_FAIL_FAST: dict[int, tuple[TypeAdapter[Any], SchemaValidator]] = {}
_COLLECTIONS = frozenset(("list", "dict", "tuple", "set", "frozenset"))


def _fail_fast(adapter: TypeAdapter[Any]) -> SchemaValidator:
    """The adapter's schema with every list, dict, tuple and set stopping at its first
    bad item (built once per adapter)."""
    built = _FAIL_FAST.get(id(adapter))
    if built is None or built[0] is not adapter:   # the adapter is held: its id is never reused
        built = _FAIL_FAST[id(adapter)] = (adapter, _build_fail_fast(adapter.core_schema))
    return built[1]


def _build_fail_fast(schema: Any) -> SchemaValidator:
    # pydantic-core reuses a complete model class's own validator for a `model` schema
    # naming it (`__pydantic_complete__`, read only while building): marked incomplete for
    # that moment, each nested model is built from the copy, with its lists fail-fast.
    copied = _with_fail_fast(schema)
    models = [cls for cls in _model_classes(copied, set()) if cls.__dict__.get("__pydantic_complete__")]
    for cls in models:
        setattr(cls, "__pydantic_complete__", False)
    try:
        return SchemaValidator(copied)
    finally:
        for cls in models:
            setattr(cls, "__pydantic_complete__", True)


def _model_classes(schema: Any, found: set[type]) -> set[type]:
    if isinstance(schema, dict):
        if schema.get("type") == "model" and isinstance(schema.get("cls"), type):
            found.add(schema["cls"])
        for value in schema.values():
            _model_classes(value, found)
    elif isinstance(schema, list):
        for item in schema:
            _model_classes(item, found)
    return found


def _with_fail_fast(schema: Any) -> Any:
    if isinstance(schema, dict):
        copied = {key: _with_fail_fast(value) for key, value in schema.items()}
        kind = copied.get("type")
        if isinstance(kind, str) and kind in _COLLECTIONS:
            copied["fail_fast"] = True
        return copied
    if isinstance(schema, list):
        return [_with_fail_fast(item) for item in schema]
    return schema


def _values_within(data: Any, limit: int) -> bool:
    """Whether `data` holds at most `limit` JSON values (stops counting past it)."""
    count = 0
    stack = [data]
    while stack:
        value = stack.pop()
        count += 1
        if count > limit:
            return False
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return True


def fastapi_errors(exc: ValidationError, limit: int | None = None) -> list[dict[str, Any]]:
    """FastAPI's rendering of the first `limit` errors (all: None)."""
    errors = []
    for error in exc.errors(include_url=False)[:limit]:
        rendered: dict[str, Any] = {"type": error["type"], "loc": ["body", *error["loc"]], "msg": error["msg"],
                                    "input": error["input"]}
        if "ctx" in error:
            rendered["ctx"] = {key: _jsonable(value) for key, value in error["ctx"].items()}
        errors.append(rendered)
    return errors


def value_error_at(loc: list[Any], message: str, input_: Any) -> list[dict[str, Any]]:
    """One pydantic `value_error` entry, for checks made outside the model."""
    return [{"type": "value_error", "loc": ["body", *loc], "msg": f"Value error, {message}", "input": input_,
             "ctx": {"error": {}}}]


def request_validation_error(errors: Sequence[dict[str, Any]], total: int | None = None) -> ApiError:
    """422 whose `detail` is FastAPI's list, bounded (see the module's doc); the OpenAI
    `error` summarises it. `total`: how many errors there were when `errors` holds only
    the first of them. Every 422 list is built here, so none escapes the bound."""
    errors = bounded_errors(errors, len(errors) if total is None else total)
    first = errors[0]
    path = _path(first["loc"][1:])
    cause = "; ".join(dict.fromkeys(f"{_path(e['loc'][1:]) or 'body'}: {e['msg']}" for e in errors[:5]))
    return ApiError(422, "Invalid request", cause, code=_CODES.get(first["type"], "invalid_value"),
                    param=path.split(".")[0].split("[")[0] or None, detail=errors)


def bounded_errors(errors: Sequence[dict[str, Any]], total: int) -> list[dict[str, Any]]:
    """The first entries (each bounded) while they fit `MAX_ERRORS` and `ERRORS_BUDGET`,
    then one entry counting the rest."""
    shown: list[dict[str, Any]] = []
    size = 2
    for error in errors[:MAX_ERRORS]:
        if shown and size > ERRORS_BUDGET:
            break
        entry = _bounded_entry(error)
        size += _encoded_size(entry) + 1
        shown.append(entry)
    left_out = total - len(shown)
    if left_out > 0:
        shown.append({"type": "too_many_errors", "loc": ["body"],
                      "msg": f"{left_out} more errors not shown (the first {len(shown)} are)", "input": None,
                      "ctx": {"shown": len(shown), "total": total}})
    return shown


def _bounded_entry(error: dict[str, Any]) -> dict[str, Any]:
    """The entry with each part cut to its bound (unchanged when all fit)."""
    entry: dict[str, Any] = {"type": clip(str(error["type"]), _TYPE_BYTES), "loc": _bounded_loc(error["loc"]),
                             "msg": clip(str(error["msg"]), _MSG_BYTES)}
    if "input" in error:
        entry["input"] = preview(error["input"], _INPUT_BYTES)
    if "ctx" in error:
        entry["ctx"] = preview(error["ctx"], _CTX_BYTES)
    return entry


def _bounded_loc(loc: Sequence[Any]) -> list[Any]:
    """Each name clipped; past `_LOC_BYTES`, the middle names replaced by one `…`,
    the first (`body`) and the last (the field) kept."""
    parts = [clip(part, _LOC_PART_BYTES) if isinstance(part, str) else part for part in loc]
    if _encoded_size(parts) <= _LOC_BYTES:
        return parts
    sizes = [_encoded_size(part) + 1 for part in parts]
    room = _LOC_BYTES - 2 - sizes[0] - _encoded_size("…") - 1
    start = len(parts)
    while start > 1 and sizes[start - 1] <= room:
        start -= 1
        room -= sizes[start]
    return [parts[0], "…", *parts[start:]]


def _encoded_size(value: Any) -> int:
    try:
        return len(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        return len(json.dumps(value, default=str))


def _path(loc: list[Any]) -> str:
    """`["tools", 0, "mcp", "server_url"]` -> `tools[0].mcp.server_url`; union branch labels
    (`str`, `list[...]`, model names) are dropped, they name no field."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _is_branch_label(part):
            continue
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def _is_branch_label(part: str) -> bool:
    return part in ("str", "int", "float", "bool") or "[" in part or part[:1].isupper()


def _jsonable(value: Any) -> Any:
    # FastAPI's jsonable_encoder renders an exception (a value error's cause) as `{}`.
    if isinstance(value, BaseException):
        return {}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)
