"""A stream event as the hot path carries it: its bytes until a stage reads it, the
sequence number patched in the bytes when the key occurs once, re-serialised once parsed;
a frame the gateway made read back from its `data:` line."""

from __future__ import annotations

import orjson
import pytest

from gateway.streaming.events import TERMINAL_EVENTS, RESPONSE_EVENTS, Event, Framed, _patch_sequence
from gateway.streaming.sse import frame


@pytest.mark.parametrize("raw, number, expected", [
    (b'{"delta":"a","sequence_number":7,"type":"t"}', 0, b'{"delta":"a","sequence_number":0,"type":"t"}'),
    (b'{"sequence_number":9}', 1234, b'{"sequence_number":1234}'),
    # A delta that contains the key as text carries it escaped: only the real key matches.
    (b'{"delta":"\\"sequence_number\\":5","sequence_number":2,"type":"t"}', 3,
     b'{"delta":"\\"sequence_number\\":5","sequence_number":3,"type":"t"}'),
    (b'{"type":"t"}', 1, None),
])
def test_patch_sequence_in_bytes(raw, number, expected):
    assert _patch_sequence(raw, number) == expected


def test_unparsed_event_payload_is_patched_bytes_and_parsed_event_is_reserialised():
    raw = b'{"delta":"x","sequence_number":5,"type":"response.output_text.delta"}'
    assert Event("response.output_text.delta", raw).payload(0) == raw.replace(b":5,", b":0,")
    event = Event("response.created", b'{"type":"response.created","response":{"id":"r"},"sequence_number":4}')
    event.data["response"]["conversation"] = "conv_x"
    assert orjson.loads(event.payload(1)) == {"type": "response.created", "sequence_number": 1,
                                              "response": {"id": "r", "conversation": "conv_x"}}


def test_a_key_that_occurs_twice_or_nested_is_left_to_a_parse():
    # A nested object with its own sequence_number: only a parse tells which is the event's.
    raw = b'{"type":"t","item":{"sequence_number":1},"sequence_number":2}'
    assert _patch_sequence(raw, 9) is None
    event = Event("t", raw)
    assert orjson.loads(event.payload(9)) == {"type": "t", "item": {"sequence_number": 1}, "sequence_number": 9}
    assert event.parsed   # the payload had to parse it


def test_an_unparsed_event_stays_bytes_until_read():
    raw = b'{"delta":"x","sequence_number":5,"type":"response.output_text.delta"}'
    event = Event("response.output_text.delta", raw)
    event.payload(1)
    assert not event.parsed   # patching does not parse
    assert event.data["delta"] == "x" and event.parsed
    # A payload that is not an object is kept readable rather than failing the stream.
    assert Event("x", b"[1,2]").data == {"value": [1, 2]}


def test_an_event_the_gateway_built_has_no_bytes():
    event = Event.build({"type": "response.created", "response": {"id": "r"}})
    assert event.type == "response.created" and event.raw is None and event.parsed
    assert orjson.loads(event.payload(0)) == {"type": "response.created", "response": {"id": "r"},
                                              "sequence_number": 0}
    assert Event.build({"delta": "x"}).type == ""


def test_a_framed_event_reads_its_data_line_and_renumbers():
    delta = {"type": "response.output_text.delta", "delta": "hi", "sequence_number": 3}
    framed = Framed("response.output_text.delta", frame("response.output_text.delta", orjson.dumps(delta)), 3)
    assert framed.number == 3 and not framed.parsed
    assert framed.data == delta
    assert orjson.loads(framed.payload(7)) == {**delta, "sequence_number": 7}


def test_every_terminal_event_is_a_response_event():
    assert TERMINAL_EVENTS < RESPONSE_EVENTS
    assert "response.requires_action" in TERMINAL_EVENTS and "response.created" not in TERMINAL_EVENTS
