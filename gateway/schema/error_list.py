"""The 422 list exactly as FastAPI renders it for LCORE, bounded.

LCORE's request models are validated by FastAPI: `TypeAdapter(Model).validate_python(
body, from_attributes=True)`, then `errors(include_url=False)` with every `loc` prefixed
by `"body"`, and exception objects in `ctx` rendered as `{}` by `jsonable_encoder`
(`fastapi_errors`). Reproducing that here lets LCORE clients that compare bodies keep
working without FastAPI. Every 422 list is built by `request_validation_error`, whoever
found the errors (the JSON reader `schema/json_body.py`, the validator
`schema/fail_fast.py`, the list caps `schema/limits.py`, checks made outside a model).

An error list is bounded (issue 39): LCORE's exact entries first, at most `MAX_ERRORS`
of them and `ERRORS_BUDGET` bytes, then one `too_many_errors` entry saying how many
more there were; each entry's `input`, `loc`, `msg` and `ctx` cut to a bounded size
(`schema/bounds.py`). An item of the Responses input union alone is 27 entries with a
400-character `loc`, the first echoing the whole input: unbounded, 3 KB of `{}` items
was a 14 MB answer.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import orjson
from pydantic import ValidationError

from gateway.schema.bounds import clip, preview
from gateway.schema.errors import ApiError, ErrorEntry

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


def fastapi_errors(exc: ValidationError, limit: int | None = None) -> list[ErrorEntry]:
    """FastAPI's rendering of the first `limit` errors (all: None)."""
    errors = []
    for error in exc.errors(include_url=False)[:limit]:
        rendered: ErrorEntry = {"type": error["type"], "loc": ["body", *error["loc"]], "msg": error["msg"],
                                    "input": error["input"]}
        if "ctx" in error:
            rendered["ctx"] = {key: _jsonable(value) for key, value in error["ctx"].items()}
        errors.append(rendered)
    return errors


def value_error_at(loc: list[Any], message: str, input_: Any) -> list[ErrorEntry]:
    """One pydantic `value_error` entry, for checks made outside the model."""
    return [{"type": "value_error", "loc": ["body", *loc], "msg": f"Value error, {message}", "input": input_,
             "ctx": {"error": {}}}]


def request_validation_error(errors: Sequence[ErrorEntry], total: int | None = None) -> ApiError:
    """422 whose `detail` is FastAPI's list, bounded (see the module's doc); the OpenAI
    `error` summarises it. `total`: how many errors there were when `errors` holds only
    the first of them. Every 422 list is built here, so none escapes the bound."""
    errors = bounded_errors(errors, len(errors) if total is None else total)
    first = errors[0]
    path = _path(first["loc"][1:])
    cause = "; ".join(dict.fromkeys(f"{_path(e['loc'][1:]) or 'body'}: {e['msg']}" for e in errors[:5]))
    return ApiError(422, "Invalid request", cause, code=_CODES.get(first["type"], "invalid_value"),
                    param=path.split(".")[0].split("[")[0] or None, detail=errors)


def bounded_errors(errors: Sequence[ErrorEntry], total: int) -> list[ErrorEntry]:
    """The first entries (each bounded) while they fit `MAX_ERRORS` and `ERRORS_BUDGET`,
    then one entry counting the rest."""
    shown: list[ErrorEntry] = []
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


def _bounded_entry(error: ErrorEntry) -> ErrorEntry:
    """The entry with each part cut to its bound (unchanged when all fit)."""
    entry: ErrorEntry = {"type": clip(str(error["type"]), _TYPE_BYTES), "loc": _bounded_loc(error["loc"]),
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
