"""The rewriter with the WebSocket framing gives, as WebSocket text frames, exactly the
events it gives as SSE blocks with SSE's (for every recorded stream and every way of cutting it
into reads), with a `stream_id` lane echoed first when there is one."""

from __future__ import annotations

import struct

import orjson
import pytest

from gateway.streaming.enrich import Enricher
from gateway.streaming.events import Event, Framed
from gateway.streaming.sse import frame
from gateway.streaming.rewriter import StreamRewriter
from gateway.streaming.websocket import WebSocketFraming, text_frame
from tests.streaming.streams import CONVERSATION, captures, chunks, per_event, rewrite_reads

CAPTURED = captures()
SPLITS = {"one read": lambda raw: [raw], "61-byte reads": lambda raw: chunks(raw, 61), "a read per event": per_event}


def messages(data: bytes) -> list[dict]:
    """Decode server frames (unmasked, final, text) the way a client does."""
    out, pos = [], 0
    while pos < len(data):
        first, second = data[pos], data[pos + 1]
        assert first == 0x81 and second & 0x80 == 0
        size, pos = second & 0x7F, pos + 2
        if size == 126:
            size, pos = struct.unpack_from("!H", data, pos)[0], pos + 2
        elif size == 127:
            size, pos = struct.unpack_from("!Q", data, pos)[0], pos + 8
        out.append(orjson.loads(data[pos:pos + size]))
        pos += size
    return out


def sse_events(data: bytes) -> list[dict]:
    return [orjson.loads(block.split(b"data: ", 1)[1]) for block in data.split(b"\n\n")
            if block.startswith(b"event: ")]


def ws_reads(reads: list[bytes], stream_id: str | None = None) -> bytes:
    return rewrite_reads(reads, rewriter=StreamRewriter(Enricher(CONVERSATION, None), WebSocketFraming(stream_id)))


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_same_events_as_sse(name, split):
    reads = SPLITS[split](CAPTURED[name])
    assert messages(ws_reads(reads)) == sse_events(rewrite_reads(reads, fast=False))


def test_a_lane_is_echoed_on_every_event():
    name = sorted(CAPTURED)[0]
    events = messages(ws_reads(per_event(CAPTURED[name]), stream_id='lane "a"'))
    assert events and all(list(event)[0] == "stream_id" and event["stream_id"] == 'lane "a"' for event in events)
    assert [{k: v for k, v in e.items() if k != "stream_id"} for e in events] == \
        sse_events(rewrite_reads(per_event(CAPTURED[name]), fast=False))


def test_engine_events_framed_whole_are_sliced_not_parsed():
    rewriter = StreamRewriter(Enricher(CONVERSATION, None), WebSocketFraming())
    delta = {"type": "response.output_text.delta", "sequence_number": 0, "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "hi", "logprobs": []}
    framed = Framed("response.output_text.delta", frame("response.output_text.delta", orjson.dumps(delta)), 0)
    out = rewriter.emit([framed, Event.build({**delta, "delta": " there"})])
    assert messages(out) == [delta, {**delta, "delta": " there", "sequence_number": 1}]
    assert framed.parsed is False


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536])
def test_frame_lengths(size):
    payload = b"x" * size
    assert messages(text_frame(b'"' + payload + b'"')) == [payload.decode()]
