"""Reading a request body (`schema/json_body.py`): the nesting depth limit, numbers
Python cannot convert and the item count before decoding (the rest of FastAPI's 422s is
in test_responses_request.py)."""

from __future__ import annotations

import orjson
import pytest

from gateway.schema.errors import ApiError
from gateway.schema.json_body import MAX_JSON_DEPTH, parse_json_body, too_many_items


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


@pytest.mark.parametrize("body", [b'{"a":' + b"1" * 4301 + b"}", b'[' + b"9" * 10_000 + b"]",
                                  b'{"input":[{"x":-' + b"1" * 5000 + b"}]}"])
def test_an_integer_past_pythons_digit_limit_is_json_invalid(body):
    with pytest.raises(ApiError) as caught:
        parse_json_body(body)
    assert caught.value.status == 422 and caught.value.code == "invalid_json"
    (error,) = caught.value.detail
    assert (error["type"], error["loc"], error["msg"], error["input"]) == ("json_invalid", ["body", 0],
                                                                           "JSON decode error", {})


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


@pytest.mark.parametrize("text", ["[" + ",".join(["{}"] * 600) + "]", '{"a": "' + "é, [x], {y} " * 500 + '"}',
                                  '["\u00e9", ' + "1, " * 400 + "1]", "[]"])
def test_a_text_message_counts_as_its_utf8_bytes(text):
    assert too_many_items(text, 1000) == too_many_items(text.encode(), 1000)
