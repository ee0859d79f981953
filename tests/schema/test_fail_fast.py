"""Validation that stops at each list's first bad item (`schema/fail_fast.py`): a small
refused body still gets LCORE's whole list, a large one a bounded list at the cost of
the schema, a valid one validates as before."""

from __future__ import annotations

import pytest

from gateway.schema.error_list import MAX_ERRORS
from gateway.schema.errors import ApiError


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
