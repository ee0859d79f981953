"""The operator's caps on a request's lists (issue 39): checked on the decoded JSON before
validation, one pydantic `too_long` entry naming the field and the cap."""

from __future__ import annotations

import time

import pytest

from gateway.legacy.request import parse_query_request
from gateway.schema.errors import ApiError
from gateway.schema.limits import RequestLimits, check_counts
from gateway.schema.responses_request import parse_responses_request
from gateway.schema.json_body import parse_json_body

LIMITS = RequestLimits(input_items=3, tools=2, include=1, attachments=2)


def refusal(call, *args, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call(*args, **kwargs)
    return caught.value


@pytest.mark.parametrize("field, cap, raw", [
    ("input", 3, {"input": [{"role": "user", "content": "x"}] * 4}),
    ("tools", 2, {"input": "x", "tools": [{"type": "function", "name": "f"}] * 3}),
    ("include", 1, {"input": "x", "include": ["reasoning.encrypted_content"] * 2}),
])
def test_a_responses_list_past_its_cap_is_one_too_long_entry(field, cap, raw):
    error = refusal(parse_responses_request, raw, limits=LIMITS)
    assert error.status == 422 and error.code == "array_above_max_length" and error.param == field
    (entry,) = error.detail
    count = len(raw[field])
    assert entry == {"type": "too_long", "loc": ["body", field],
                     "msg": f"List should have at most {cap} items after validation, not {count}",
                     "input": raw[field], "ctx": {"field_type": "List", "max_length": cap, "actual_length": count}}
    assert error.body()["error"]["message"] == f"Invalid request: {field}: {entry['msg']}"


def test_at_the_cap_the_request_is_validated_as_usual():
    request = parse_responses_request({"input": [{"role": "user", "content": "x"}] * 3,
                                       "tools": [{"type": "function", "name": "f", "parameters": {}}] * 2,
                                       "include": ["reasoning.encrypted_content"]}, limits=LIMITS)
    assert len(request.input) == 3 and len(request.tools) == 2


def test_attachments_past_their_cap():
    raw = {"query": "q", "attachments": [{"attachment_type": "log", "content_type": "text/plain",
                                          "content": "x"}] * 3}
    (entry,) = refusal(parse_query_request, raw, LIMITS).detail
    assert entry["loc"] == ["body", "attachments"] and entry["ctx"]["max_length"] == 2
    assert len(parse_query_request({**raw, "attachments": raw["attachments"][:2]}, LIMITS).attachments) == 2


@pytest.mark.parametrize("raw", [None, [], "x", {"input": "a string"}, {"input": {"not": "a list"}}, {"tools": None}])
def test_what_is_not_a_list_is_left_to_validation(raw):
    check_counts(raw, LIMITS.responses())


def test_the_check_comes_before_item_by_item_validation():
    """50,000 items a union refuses (27 errors each, seconds to validate): refused in
    the time it takes to read the list's length."""
    raw = parse_json_body(b'{"input":[' + b",".join([b"{}"] * 50_000) + b"]}", max_items=200_000)
    started = time.perf_counter()
    error = refusal(parse_responses_request, raw, limits=RequestLimits())
    assert time.perf_counter() - started < 0.5
    assert error.detail[0]["ctx"]["actual_length"] == 50_000
    assert len(error.detail[0]["input"]) < 200   # the echoed list is a prefix


def test_the_defaults_are_the_configurations():
    from gateway.config.service import ServiceConfig

    service = ServiceConfig()
    assert RequestLimits() == RequestLimits(input_items=service.max_input_items, tools=service.max_tools,
                                            include=service.max_include_entries,
                                            attachments=service.max_attachments)
