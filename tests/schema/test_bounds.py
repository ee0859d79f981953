"""The bound on what an error renders (issue 39): strings clipped and echoed values cut to
a prefix, in encoded bytes, in O(the bound); unchanged when they fit."""

from __future__ import annotations

import orjson
import pytest

from gateway.schema.bounds import CUT, MAX_ERROR_BODY_BYTES, clip, json_size, preview
from gateway.schema.errors import ApiError, bad_request, invalid_attribute


def size(value) -> int:
    return len(orjson.dumps(value))


@pytest.mark.parametrize("text", ["", "short", "x" * 100, "é" * 60, "\x00" * 20])
def test_a_string_that_fits_is_kept(text):
    assert clip(text, 128) == text if json_size(text) <= 128 else True


@pytest.mark.parametrize("text", ["x" * 10_000, "é" * 10_000, "\U0001F600" * 10_000, "\x00\"\\" * 10_000,
                                  "a" * 127 + "é"])
def test_a_string_that_does_not_fit_is_a_prefix_within_the_bound(text):
    clipped = clip(text, 128)
    if json_size(text) <= 128:
        assert clipped == text
        return
    assert clipped.endswith(CUT) and text.startswith(clipped[:-len(CUT)])
    assert json_size(clipped) <= 128
    assert len(clipped) > 8   # as much as fits, not nothing


def test_a_lone_surrogate_is_measured_not_raised():
    assert json_size("\ud800") >= 3
    assert json_size(clip("\ud800" * 1000, 64)) <= 64


@pytest.mark.parametrize("value", [None, 1, 2.5, True, "x", [], {}, [{"type": "message", "role": "robot"}],
                                   {"a": [1, 2, {"b": "c"}]}])
def test_a_value_that_fits_is_the_same_object(value):
    assert preview(value, 512) is value


@pytest.mark.parametrize("value", [
    [{}] * 50_000,
    ["x" * 1000] * 1000,
    {f"key{i}": i for i in range(10_000)},
    {"k" * 10_000: "v" * 10_000},
    [[[[["deep"] * 100] * 100] * 100]],
    {"input": [{"type": "message", "content": "é" * 5000}] * 10},
    [1.5e300] * 1000,
])
def test_a_value_that_does_not_fit_is_a_prefix_within_the_bound(value):
    shown = preview(value, 512)
    assert size(shown) <= 512
    assert size(shown) > 64   # a useful prefix, not just the mark
    if isinstance(value, list) and len(value) > 1:
        assert isinstance(shown, list) and shown[-1].startswith(CUT) and shown[-1].endswith("more")
    if isinstance(value, dict) and len(value) > 1:
        assert isinstance(shown, dict) and shown[CUT] > 0


def test_a_list_cut_short_says_how_many_items_it_left_out():
    shown = preview([{}] * 50_000, 512)
    kept = shown[:-1]
    assert kept == [{}] * len(kept)
    assert shown[-1] == f"{CUT} {50_000 - len(kept)} more"


def test_api_error_strings_are_clipped():
    huge = "x" * 1_000_000
    for error in (invalid_attribute(f"Invalid attachment type {huge}"), bad_request(huge, param=huge),
                  ApiError(400, huge, huge, code="c", param=huge)):
        assert size(error.body()) <= MAX_ERROR_BODY_BYTES
        assert size(error.body(openai=False)) <= MAX_ERROR_BODY_BYTES
