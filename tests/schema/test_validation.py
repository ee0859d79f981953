"""Reading a request body: the nesting depth limit (the rest of FastAPI's 422s is in
test_responses_request.py), and the provider-data header the `solr` object goes in."""

from __future__ import annotations

import json

import orjson
import pytest

from gateway.schema.errors import ApiError
from gateway.schema.responses_request import provider_data_header
from gateway.schema.validation import MAX_JSON_DEPTH, parse_json_body


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
