"""The WebSocket transport's `Framing` (sans-I/O): the `StreamRewriter`'s decoding,
repair, enrichment and numbering, as for SSE, but each event is framed as one WebSocket
text message (RFC 6455, server to client: unmasked, uncompressed) instead of an SSE
block. The frames of one upstream read stay one `bytes`, so the socket gets them in
one write, as SSE does; nothing is parsed back out of SSE text.

A run of pass-through blocks (the SSE fast path that rewrites many blocks in one
`replace`) is split into its blocks, each framed as it came: each event needs a frame
header of its own. A pass-through event alone costs one regex match and one formatting
step. A `stream_id` lane (the `openai` client's WebSocket
field) is echoed as the first key of every event.
"""

from __future__ import annotations

import struct

import orjson

from gateway.streaming.events import Event, Framed
from gateway.streaming.framing import Parts

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


class WebSocketFraming:
    """A stream's events as WebSocket text messages, one per event; no `[DONE]`."""

    __slots__ = ("_lane",)
    shows_numbers = True

    def __init__(self, stream_id: str | None = None):
        self._lane = lane_prefix(stream_id)

    def message(self, payload: bytes) -> bytes:
        """The frame of one event's JSON object."""
        if self._lane is not None:
            payload = self._lane + payload[1:]
        return text_frame(payload)

    def one(self, parts: Parts) -> bytes:
        return self.message(b"%s%d%s" % parts[1:])

    def framed(self, event: Framed) -> bytes:
        raw = event.raw   # the engine's own SSE block: its data line is the object
        return self.message(raw[raw.index(_DATA) + 7:-2])

    def event(self, event: Event, number: int) -> bytes:
        return self.message(event.payload(number))

    def run(self, kind: bytes, data: bytes, start: int, stop: int, count: int) -> bytes:
        """Each block's JSON as it came (its number is already the client's), in a frame
        of its own: no regex per event."""
        message = self.message
        blocks = data[start:stop - 2].split(b"\n\n")
        return b"".join([message(block.partition(b"data: ")[2]) for block in blocks])

    def end(self, terminal: Event, number: int, available_quotas: dict[str, int]) -> bytes:
        return self.event(terminal, number)

    def sent(self, numbered: int) -> int:
        return numbered
