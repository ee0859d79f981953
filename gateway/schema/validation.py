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
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from gateway.schema.errors import ApiError

Model = TypeVar("Model", bound=BaseModel)

# Arrays and objects a body may nest (the top-level object is level 1). orjson writes
# at most _ORJSON_WRITES levels; the rest is room for what the gateway wraps around a
# client's values when it re-encodes them.
MAX_JSON_DEPTH = 200
_ORJSON_WRITES = 254
_TOO_DEEP = (f"nesting depth limit exceeded: arrays and objects may nest at most {MAX_JSON_DEPTH} levels "
             "deep")

_CODES = {"missing": "missing_required_parameter", "extra_forbidden": "unknown_parameter",
          "json_invalid": "invalid_json"}


def parse_json_body(body: bytes) -> Any:
    """The decoded body, or the 422 FastAPI gives for an empty or undecodable one."""
    if not body:
        raise request_validation_error([{"type": "missing", "loc": ["body"], "msg": "Field required",
                                         "input": None}])
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
    """Validate like FastAPI does, or raise the 422 with its error list."""
    try:
        return adapter.validate_python(data, from_attributes=True, context=context)
    except ValidationError as exc:
        raise request_validation_error(fastapi_errors(exc)) from None


def fastapi_errors(exc: ValidationError) -> list[dict[str, Any]]:
    errors = []
    for error in exc.errors(include_url=False):
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


def request_validation_error(errors: list[dict[str, Any]]) -> ApiError:
    """422 whose `detail` is FastAPI's list; the OpenAI `error` summarises it."""
    first = errors[0]
    path = _path(first["loc"][1:])
    cause = "; ".join(dict.fromkeys(f"{_path(e['loc'][1:]) or 'body'}: {e['msg']}" for e in errors[:5]))
    return ApiError(422, "Invalid request", cause, code=_CODES.get(first["type"], "invalid_value"),
                    param=path.split(".")[0].split("[")[0] or None, detail=errors)


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
