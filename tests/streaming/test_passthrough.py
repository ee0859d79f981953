"""The byte patterns that let pass-through events skip the JSON parser: each recognises
its block in both SSE dialects (Llama Stack's data line with `type` last, OpenAI's
`event:` line with `type` first), captures the sequence number's place, and refuses
what a parse would read differently."""

from __future__ import annotations

import pytest

from gateway.streaming import passthrough as pt

DELTA = b"response.output_text.delta"
LLAMA = b'data: {"content_index":0,"delta":"Hi","sequence_number":12,"type":"response.output_text.delta"}\n\n'
OPENAI = (b'event: response.output_text.delta\n'
          b'data: {"type":"response.output_text.delta","delta":"Hi","sequence_number":12}\n\n')


def test_type_last_captures_the_number_and_the_kind():
    match = pt.TYPE_LAST.fullmatch(LLAMA)
    assert match is not None
    head, tail, kind = match.groups()
    assert head.endswith(pt.SEQUENCE_KEY) and kind == DELTA
    # The digits lie between head and tail: renumbering is a join.
    assert head + b"0" + tail == LLAMA[len(b"data: "):-2].replace(b":12,", b":0,")
    assert pt.TYPE_FIRST.fullmatch(LLAMA) is None


def test_type_first_with_or_without_the_event_line():
    for block in (OPENAI, OPENAI.split(b"\n", 1)[1]):
        match = pt.TYPE_FIRST.fullmatch(block)
        assert match is not None and match.group(2) == DELTA
        assert match.group(1).endswith(pt.SEQUENCE_KEY) and match.group(3) == b"}"
    assert OPENAI.startswith(pt.STARTS) and LLAMA.endswith(pt.LAST_ENDS)


@pytest.mark.parametrize("block", [
    # A type no stage passes through unchanged.
    b'data: {"type":"response.completed","sequence_number":1,"response":{}}\n\n',
    b'data: {"response":{},"sequence_number":1,"type":"response.completed"}\n\n',
    # No sequence number to patch, or no digits after the key.
    b'data: {"type":"response.output_text.delta","delta":"Hi"}\n\n',
    b'data: {"type":"response.output_text.delta","delta":"Hi","sequence_number":null}\n\n',
    # The type spelled inside a string value: escaped, so it is not the event's type.
    b'data: {"sequence_number":1,"type":"x","delta":"\\",\\"type\\":\\"response.output_text.delta\\"}"}\n\n',
    # Not the end of a block.
    LLAMA[:-1],
])
def test_what_a_parse_would_read_differently_does_not_match(block):
    assert pt.TYPE_FIRST.fullmatch(block) is None and pt.TYPE_LAST.fullmatch(block) is None


def test_a_run_is_one_kind_in_one_dialect():
    second = LLAMA.replace(b":12,", b":13,").replace(b'"Hi"', b'" there"')
    assert pt.LAST_RUN.fullmatch(LLAMA + second) is not None
    assert [int(n) for n in pt.SEQUENCE.findall(LLAMA + second)] == [12, 13]
    refusal = LLAMA.replace(DELTA, b"response.refusal.delta")
    # Another kind ends the run where it starts.
    assert pt.LAST_RUN.match(LLAMA + refusal).end() == len(LLAMA)
    assert pt.EVENT_RUN.fullmatch(OPENAI + OPENAI) is not None
    assert pt.FIRST_RUN.fullmatch(OPENAI.split(b"\n", 1)[1] * 3) is not None
    # Dialects do not mix inside a run.
    assert pt.EVENT_RUN.fullmatch(OPENAI + LLAMA) is None


def test_every_pass_through_kind_is_recognised_at_both_ends():
    for kind in pt.PASS_THROUGH:
        assert b"event: " + kind + b"\n" in pt.STARTS
        assert b',"type":"' + kind + b'"}' in pt.ENDS
    assert pt.DIGITS(42) == b"42"
