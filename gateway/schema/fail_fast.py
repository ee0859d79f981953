"""Validating a decoded body like FastAPI does, at the cost of the request.

`validate` answers what FastAPI's `TypeAdapter(Model).validate_python(body,
from_attributes=True)` answers, its errors rendered as FastAPI's bounded 422 list
(`schema/error_list.py`). Every list and dict of the model stops at its first bad item
(`fail_fast`, on a copy of the model's schema built once per adapter), so a refusal
costs O(the schema), not O(the body), and a valid body validates exactly as before. A
refused body of at most `EXACT_VALUES` JSON values is validated again in full, for
LCORE's exact list.
"""

from __future__ import annotations

import itertools
from typing import Any, TypeVar, cast

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

from gateway.schema.error_list import MAX_ERRORS, fastapi_errors, request_validation_error

Model = TypeVar("Model", bound=BaseModel)

# A refused body with at most this many JSON values is validated in full (LCORE's exact
# list): at most ~27 errors a value (an input item no branch accepts), so a few thousand.
# A larger one gets the fail-fast list, which is LCORE's too unless a list holds more
# than one bad item (it shows the first of each).
EXACT_VALUES = 500
_MAX_TOP_LEVEL_KEYS = 256
_FAIL_FAST: dict[int, tuple[TypeAdapter[Any], SchemaValidator]] = {}
_COLLECTIONS = frozenset(("list", "dict", "tuple", "set", "frozenset"))


def validate(adapter: TypeAdapter[Model], data: Any, context: dict[str, Any] | None = None) -> Model:
    """The model FastAPI would build, or the 422 with its error list (bounded): LCORE's
    exact list for a body of at most `EXACT_VALUES` JSON values, else the errors the
    fail-fast pass found (see the module's doc)."""
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
