"""The scripted upstream's triggers (words in the text) and knobs (metadata strings),
parsed once: the first trigger in the documented order wins, bad knob values are
ignored. (What each trigger does to an answer: test_responses.py, test_chat.py.)"""

from __future__ import annotations

from gateway.devserver.triggers import (ALL_TRIGGERS, CUT_FRAME, ECHO_ERROR, ECHO_ERROR_FIRST, FAIL_UPSTREAM,
                                        GARBAGE, GARBAGE_FRAME, NOT_JSON, NOT_JSON_FIRST, NOT_JSON_FRAME, STALL_STREAM,
                                        UNTERMINATED_FRAME, Knobs, echo_of, find_trigger, malform, read_knobs)


def test_the_first_trigger_in_order_wins():
    assert find_trigger("please fail-upstream") == FAIL_UPSTREAM
    assert find_trigger("stall-stream then fail-upstream") == FAIL_UPSTREAM   # order of ALL_TRIGGERS, not of the text
    assert ALL_TRIGGERS.index(FAIL_UPSTREAM) < ALL_TRIGGERS.index(STALL_STREAM)
    # `echo-error-first` contains `echo-error`: the longer one is checked first.
    assert find_trigger("echo-error-first") == ECHO_ERROR_FIRST and find_trigger("echo-error") == ECHO_ERROR
    assert find_trigger("a well-behaved question") is None and find_trigger("no dash") is None


def test_knobs_from_metadata_and_their_defaults():
    assert read_knobs(None, 20) == Knobs(delay_s=0.02)
    assert read_knobs({}, -5, "openai") == Knobs(delay_s=0.0, dialect="openai")
    knobs = read_knobs({"scripted_deltas": "7", "scripted_delay_ms": "250", "scripted_dialect": "openai",
                        "scripted_echo_tools": "verbatim"}, 0)
    assert knobs == Knobs(deltas=7, delay_s=0.25, dialect="openai", echo_tools_verbatim=True)


def test_bad_knob_values_are_ignored_or_floored():
    knobs = read_knobs({"scripted_deltas": "many", "scripted_delay_ms": "soon", "scripted_dialect": "klingon"}, 10)
    assert knobs == Knobs(deltas=None, delay_s=0.01, dialect="llama-stack")
    assert read_knobs({"scripted_deltas": "-3", "scripted_delay_ms": "-1"}, 10) == Knobs(deltas=0, delay_s=0.0)


def test_the_echo_repeats_credentials_and_tools_verbatim():
    echoed = echo_of({"Authorization": "Bearer s3cret"}, {"tools": [{"type": "mcp", "server_url": "http://x"}]})
    assert echoed == ('scripted echo: Authorization=Bearer s3cret X-LlamaStack-Provider-Data=None '
                      'tools=[{"type":"mcp","server_url":"http://x"}]')


def test_malformed_sse_triggers_change_the_frames_as_documented():
    frames = [b"data: {\"n\":%d}\n\n" % n for n in range(8)]   # two opening frames, then deltas
    assert malform(None, frames, 2) == frames and malform(STALL_STREAM, frames, 2) == frames
    assert malform(GARBAGE_FRAME, frames, 2) == frames[:2] + [GARBAGE] + frames[2:]
    assert malform(NOT_JSON_FIRST, frames, 2) == [NOT_JSON] + frames
    assert malform(NOT_JSON_FRAME, frames, 2) == frames[:3] + [NOT_JSON] + frames[3:]
    cut = malform(CUT_FRAME, frames, 2)
    assert cut[:-1] == frames[:5] and frames[5].startswith(cut[-1]) and not cut[-1].endswith(b"\n\n")
    assert malform(UNTERMINATED_FRAME, frames, 2) == frames[:-1] + [b"data: {\"n\":7}"]
    assert find_trigger("please not-json-first") == NOT_JSON_FIRST
