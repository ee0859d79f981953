"""SSE's `Framing`, and the one `StreamRewriter` every transport's framing plugs into."""

from __future__ import annotations

import orjson

from gateway.streaming.events import Event, Framed
from gateway.streaming.framing import SSEFraming
from gateway.streaming.rewriter import StreamRewriter

DELTA = b'{"type":"response.output_text.delta","delta":"hi","sequence_number":'


def test_one_block_is_the_plain_format():
    parts = (b"response.output_text.delta", DELTA, 7, b"}")
    assert SSEFraming().one(parts) == b"event: %s\ndata: %s%d%s\n\n" % parts
    assert SSEFraming().one(parts) == b"event: response.output_text.delta\ndata: " + DELTA + b"7}\n\n"


def test_a_run_gets_the_event_lines_it_lacks_and_keeps_those_it_has():
    kind = b"response.output_text.delta"
    bare = b"data: " + DELTA + b"0}\n\ndata: " + DELTA + b"1}\n\n"
    named = b"event: %s\ndata: %s0}\n\nevent: %s\ndata: %s1}\n\n" % (kind, DELTA, kind, DELTA)
    assert SSEFraming().run(kind, bare, 0, len(bare), 2) == named
    assert SSEFraming().run(kind, named, 0, len(named), 2) is named
    around = b"data: {}\n\n" + bare + b"data: {}\n\n"
    assert SSEFraming().run(kind, around, 10, 10 + len(bare), 2) == named


def test_events_engine_frames_and_the_end():
    framing = SSEFraming()
    event = Event.build({"type": "response.in_progress", "sequence_number": 0, "response": {"id": "r"}})
    assert framing.event(event, 3) == (b'event: response.in_progress\ndata: '
                                       + orjson.dumps({"type": "response.in_progress", "sequence_number": 3,
                                                       "response": {"id": "r"}}) + b"\n\n")
    frame = b"event: response.output_text.delta\ndata: " + DELTA + b"4}\n\n"
    assert framing.framed(Framed("response.output_text.delta", frame, 4)) is frame
    done = Event.build({"type": "response.completed", "sequence_number": 0, "response": {"id": "r"}})
    assert framing.end(done, 5, {}).endswith(b"\n\ndata: [DONE]\n\n")
    assert framing.sent(6) == 6


def test_no_transport_subclasses_the_rewriter():
    """Every transport is a framing given to the one rewriter (issue 40)."""
    import gateway.background.runs  # noqa: F401
    import gateway.http.query  # noqa: F401
    import gateway.http.sse  # noqa: F401
    import gateway.http.websocket  # noqa: F401
    assert StreamRewriter.__subclasses__() == []
