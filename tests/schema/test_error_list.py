"""The 422 list (`schema/error_list.py`): bounded in entries and bytes, each entry's
parts cut (issue 39)."""

from __future__ import annotations

import orjson

from gateway.schema.bounds import MAX_ERROR_BODY_BYTES
from gateway.schema.error_list import MAX_ERRORS, request_validation_error


def entry(i: int, **extra) -> dict:
    return {"type": "missing", "loc": ["body", "items", i], "msg": "Field required", "input": {}, **extra}


def test_a_short_error_list_is_unchanged():
    errors = [entry(i) for i in range(MAX_ERRORS)]
    assert request_validation_error(errors).detail == errors


def test_a_long_error_list_is_capped_with_one_entry_counting_the_rest():
    errors = [entry(i) for i in range(1000)]
    detail = request_validation_error(errors[:MAX_ERRORS], 27_000).detail
    assert detail[:MAX_ERRORS] == errors[:MAX_ERRORS]
    assert detail[MAX_ERRORS] == {"type": "too_many_errors", "loc": ["body"],
                                  "msg": f"{27_000 - MAX_ERRORS} more errors not shown (the first {MAX_ERRORS} are)",
                                  "input": None, "ctx": {"shown": MAX_ERRORS, "total": 27_000}}
    assert len(request_validation_error(errors).detail) == MAX_ERRORS + 1


def test_large_entries_stop_at_the_byte_budget():
    errors = [entry(i, msg="m" * 400, input="i" * 400, ctx={"c": "c" * 400}) for i in range(MAX_ERRORS)]
    error = request_validation_error(errors)
    assert len(error.detail) < MAX_ERRORS + 1 and error.detail[-1]["type"] == "too_many_errors"
    assert len(orjson.dumps(error.body())) <= MAX_ERROR_BODY_BYTES


def test_each_part_of_an_entry_is_bounded():
    loc = ["body", *(f"Model{i}" + "x" * 1000 for i in range(300)), "field"]
    (shown,) = request_validation_error([{"type": "t" * 1000, "loc": loc, "msg": "m" * 100_000,
                                          "input": ["i" * 100_000] * 10, "ctx": {"error": "e" * 100_000}}]).detail
    assert shown["loc"][0] == "body" and shown["loc"][1] == "…" and shown["loc"][-1] == "field"
    assert len(orjson.dumps(shown["loc"])) <= 1024
    assert len(orjson.dumps(shown["msg"])) <= 512 and len(orjson.dumps(shown["type"])) <= 64
    assert len(orjson.dumps(shown["input"])) <= 512 and len(orjson.dumps(shown["ctx"])) <= 512


def test_a_long_loc_part_is_clipped():
    (shown,) = request_validation_error([entry(0, loc=["body", "x" * 5000, 3])]).detail
    assert shown["loc"][1].startswith("xxx") and len(orjson.dumps(shown["loc"][1])) <= 448
