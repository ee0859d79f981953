"""The `StreamRewriter` for the WebSocket transport (sans-I/O): the same decoding,
repair, enrichment and numbering as SSE, but each event is framed as one WebSocket
text message (RFC 6455, server to client: unmasked, uncompressed) instead of an SSE
block. The frames of one upstream read stay one `bytes`, so the socket gets them in
one write, as SSE does; nothing is parsed back out of SSE text.

Runs (the SSE fast path that rewrites many blocks in one `replace`) are off: each
event needs a frame header of its own. A pass-through event still costs one regex
match and one formatting step. A `stream_id` lane (the `openai` client's WebSocket
field) is echoed as the first key of every event.
"""

from __future__ import annotations

import re
import struct

import orjson

from gateway.streaming import passthrough as pt
from gateway.streaming.enrich import Enricher
from gateway.streaming.events import Event, Framed
from gateway.streaming.rewriter import StreamRewriter, _created_for

_LEN16 = struct.Struct("!BBH")
_LEN64 = struct.Struct("!BBQ")
_TEXT = 0x81   # FIN + opcode 1 (text)
_DATA = b"\ndata: "


def text_frame(payload: bytes) -> bytes:
    """One unmasked, uncompressed WebSocket text frame (what a server sends)."""
    size = len(payload)
    if size < 126:
        return bytes((_TEXT, size)) + payload
    if size < 65536:
        return _LEN16.pack(_TEXT, 126, size) + payload
    return _LEN64.pack(_TEXT, 127, size) + payload


def lane_prefix(stream_id: str | None) -> bytes | None:
    """What replaces the opening `{` of each event of a `stream_id` lane."""
    if stream_id is None:
        return None
    return b'{"stream_id":' + orjson.dumps(stream_id) + b","


class WebSocketRewriter(StreamRewriter):
    __slots__ = ("_lane",)

    def __init__(self, enricher: Enricher, stream_id: str | None = None):
        super().__init__(enricher)
        self._runs = False
        self._lane = lane_prefix(stream_id)

    def message(self, payload: bytes) -> bytes:
        """The frame of one event's JSON object."""
        if self._lane is not None:
            payload = self._lane + payload[1:]
        return text_frame(payload)

    def emit(self, events: list[Event]) -> bytes:
        out = []
        for event in events:
            if event.__class__ is Framed and event.number == self._next:
                raw = event.raw   # the engine's own SSE block: its data line is the object
                assert raw is not None
                out.append(self.message(raw[raw.index(_DATA) + 7:-2]))
                self._next += 1
            else:
                out.append(self._frame(self.enricher.apply(event)))
        return b"".join(out)

    def terminal(self, event: Event, available_quotas: dict[str, int]) -> bytes:
        """The settled terminal event (a stream that ended before it began first gets
        its `response.created`); a WebSocket has no `[DONE]`."""
        opening = self._frame(self.enricher.apply(_created_for(event))) if self._next == 0 else b""
        self.enricher.terminal(event, available_quotas)
        return opening + self._frame(event)

    def _framed(self, match: re.Match[bytes]) -> bytes | None:
        if match.re is pt.TYPE_LAST:
            head, tail, _kind = match.groups()
        else:
            head, _kind, tail = match.groups()
        if head.find(pt.SEQUENCE_KEY, 0, -1) >= 0 or tail.find(pt.SEQUENCE_KEY) >= 0:
            return None
        number = self._next
        self._next = number + 1
        return self.message(b"%s%d%s" % (head, number, tail))

    def _frame(self, event: Event) -> bytes:
        payload = event.payload(self._next)
        self._next += 1
        return self.message(payload)
