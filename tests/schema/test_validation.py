"""Reading a request body: the nesting depth limit and numbers Python cannot convert (the
rest of FastAPI's 422s is in test_responses_request.py), the bound on an error list
(issue 39), and the provider-data header the `solr` object goes in."""

from __future__ import annotations

import json

import orjson
import pytest

from gateway.schema.errors import ApiError
from gateway.schema.responses_request import provider_data_header
from gateway.schema.bounds import MAX_ERROR_BODY_BYTES
from gateway.schema.validation import MAX_ERRORS, MAX_JSON_DEPTH, parse_json_body, request_validation_error


def arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_the_limit_leaves_room_below_what_orjson_writes():
    data = parse_json_body(arrays(MAX_JSON_DEPTH))
    # Wrapped as the gateway wraps a client's values (a stream event around a response
    # around the echoed tools), it still encodes.
    for _ in range(10):
        data = {"wrapper": [data]}
    orjson.dumps(data)


@pytest.mark.parametrize("body", [arrays(MAX_JSON_DEPTH + 1), arrays(255), arrays(1025), b"[" * 990 + b"x",
                                  b'{"a":' * 300 + b"1" + b"}" * 300])
def test_deeper_is_fastapis_json_invalid_at_position_0(body):
    with pytest.raises(ApiError) as caught:
        parse_json_body(body)
    assert caught.value.status == 422 and caught.value.code == "invalid_json"
    (error,) = caught.value.detail
    assert error["type"] == "json_invalid" and error["loc"] == ["body", 0]
    assert error["ctx"]["error"].startswith("nesting depth limit exceeded")


def test_brackets_in_strings_are_not_nesting():
    body = orjson.dumps({"input": "[" * 5000 + "{" * 5000})
    assert parse_json_body(body) == {"input": "[" * 5000 + "{" * 5000}


@pytest.mark.parametrize("solr", [
    {"mode": "hybrid", "filters": {"fq": ["product:x"]}},
    {"filters": {"q": "\u00e9t\u00e9 \u65e5\u672c \U0001F600 \u2028 \x7f \x00 \n \" \\"}},
])
def test_provider_data_header_is_printable_ascii_json(solr):
    header = provider_data_header(solr)
    assert all(" " <= char <= "~" for char in header)
    assert json.loads(header) == {"solr": solr}


@pytest.mark.parametrize("body", [b'{"a":' + b"1" * 4301 + b"}", b'[' + b"9" * 10_000 + b"]",
                                  b'{"input":[{"x":-' + b"1" * 5000 + b"}]}"])
def test_an_integer_past_pythons_digit_limit_is_json_invalid(body):
    with pytest.raises(ApiError) as caught:
        parse_json_body(body)
    assert caught.value.status == 422 and caught.value.code == "invalid_json"
    (error,) = caught.value.detail
    assert (error["type"], error["loc"], error["msg"], error["input"]) == ("json_invalid", ["body", 0],
                                                                           "JSON decode error", {})


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


def test_a_small_refused_body_gets_lcores_whole_list():
    from gateway.schema.responses_request import parse_responses_request

    with pytest.raises(ApiError) as caught:
        parse_responses_request({"input": [{}] * 10})
    detail = caught.value.detail
    # 27 errors an item, and the `str` branch's: all counted, the first 50 shown.
    assert detail[-1]["type"] == "too_many_errors" and detail[-1]["ctx"] == {"shown": MAX_ERRORS, "total": 271}


def test_a_large_refused_body_stops_at_each_lists_first_bad_item():
    import time

    from gateway.schema.responses_request import parse_responses_request

    raw = {"input": [{"type": "message", "role": "user", "content": [{}] * 300_000}], "metadata": {
        f"k{i}": i for i in range(100_000)}, "shield_ids": list(range(100_000))}
    started = time.perf_counter()
    with pytest.raises(ApiError) as caught:
        parse_responses_request(raw)
    assert time.perf_counter() - started < 0.5
    detail = caught.value.detail
    assert len(detail) <= MAX_ERRORS + 1
    assert sum(entry["loc"][:2] == ["body", "metadata"] for entry in detail) == 1
    assert sum(entry["loc"][:2] == ["body", "shield_ids"] for entry in detail) == 1


def test_a_body_with_thousands_of_unknown_keys_is_bounded():
    from gateway.schema.responses_request import parse_responses_request

    with pytest.raises(ApiError) as caught:
        parse_responses_request({"input": "x", **{f"unknown{i}": 1 for i in range(100_000)}})
    detail = caught.value.detail
    assert detail[0]["type"] == "extra_forbidden" and detail[-1]["type"] == "too_many_errors"
    assert detail[-1]["ctx"]["total"] == 100_000


def test_fail_fast_leaves_what_is_valid_unchanged():
    from gateway.schema.responses_request import _ADAPTER, parse_responses_request

    raw = {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}] * 3}],
           "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "metadata": {"a": "b"}}
    assert parse_responses_request(raw) == _ADAPTER.validate_python(raw, context={"configured_mcp_servers": {}})


def too_many(limit: int) -> dict:
    return {"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error", "input": {},
            "ctx": {"error": f"too many items: a body may hold at most {limit} arrays, objects and items in them"}}


@pytest.mark.parametrize("body", [b"[" + b",".join([b"{}"] * 600) + b"]", b"[" + b"1," * 1200 + b"1]",
                                  b'{"a":[' + b",".join([b'{"b":[1,2]}'] * 300) + b"]}",
                                  b"{" + b",".join(b'"k%d":"v"' % i for i in range(1200)) + b"}",   # by its strings
                                  b"[" + b"," * 2000])   # malformed too: refused before anything decodes it
def test_more_items_than_the_limit_is_refused_before_decoding(body):
    with pytest.raises(ApiError) as caught:
        parse_json_body(body, max_items=1000)
    assert caught.value.detail == [too_many(1000)]


@pytest.mark.parametrize("body", [
    orjson.dumps({"input": "a, b, c {x} [y] " * 10_000}),            # commas and brackets inside strings
    orjson.dumps({"input": ['he said "a, [b], {c}" \\ ,,,'] * 100}),   # escaped quotes and backslashes
    orjson.dumps({"input": '"' * 10_000 + "," * 3000}),                # escaped quotes are no strings
    b"[" + b",".join([b"{}"] * 333) + b"]",                            # 333 + 332 + 1 = 666 items
])
def test_strings_do_not_count_and_a_body_within_the_limit_decodes(body):
    assert parse_json_body(body, max_items=1000) == orjson.loads(body)
