"""The SSE decoder, type sniffing without parsing, and framing (sequence patching: test_events.py)."""

from __future__ import annotations

import pytest

from gateway.streaming.sse import SSEDecoder, event_type, frame


@pytest.mark.parametrize("payload, expected", [
    (b'{"type":"response.output_text.delta","delta":"x","sequence_number":3}', "response.output_text.delta"),
    (b'{"delta":"x","item":{"type":"message"},"sequence_number":3,"type":"response.output_text.delta"}',
     "response.output_text.delta"),
    # A nested object that ends the payload is not the top-level type.
    (b'{"delta":"x","item":{"z":1,"type":"message"}}', None),
    (b'{"a":{"z":1,"type":"x"},"b":"c"}', None),
    (b'{"type": "spaced"}', None),
    (b'{"error": {"message": "m", "code": "404"}}', None),
])
def test_event_type_is_read_only_from_top_level_positions(payload, expected):
    assert event_type(payload) == expected


def test_decoder_splits_chunks_and_keeps_raw_bytes():
    decoder = SSEDecoder()
    first = b'data: {"type":"response.created","response":{},"sequence_number":0}\n\nda'
    second = b'ta: {"delta":"hi","sequence_number":1,"type":"response.output_text.delta"}\n\n'
    events = decoder.feed(first)
    assert [e.type for e in events] == ["response.created"] and not events[0].parsed
    events = decoder.feed(second)
    assert events[0].type == "response.output_text.delta"
    assert events[0].raw == b'{"delta":"hi","sequence_number":1,"type":"response.output_text.delta"}'
    assert not events[0].parsed


def test_decoder_handles_crlf_event_lines_comments_multiline_data_and_done():
    decoder = SSEDecoder()
    stream = (b": keep-alive\r\n\r\nevent: response.created\r\ndata: {\"type\":\"response.created\",\r\n"
              b"data: \"sequence_number\":0}\r\n\r\ndata: [DONE]\r\n\r\n")
    events = decoder.feed(stream)
    assert [e.type for e in events] == ["response.created"]
    assert events[0].data == {"type": "response.created", "sequence_number": 0}
    assert decoder.done


def test_untyped_and_invalid_events_are_parsed():
    decoder = SSEDecoder()
    events = decoder.feed(b'data: {"error": {"message": "boom", "code": "404"}}\n\ndata: not json\n\n')
    assert events[0].type == "" and events[0].data["error"]["message"] == "boom"
    assert events[1].type == "" and "not JSON" in events[1].data["error"]["message"]


def test_close_keeps_a_complete_unterminated_event_and_drops_a_cut_one():
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"type":"response.completed","response":{}}') == []
    assert [e.type for e in decoder.close()] == ["response.completed"]
    decoder = SSEDecoder()
    decoder.feed(b'data: {"type":"response.completed","resp')
    assert decoder.close() == []


def test_frame():
    assert frame("response.created", b"{}") == b"event: response.created\ndata: {}\n\n"
