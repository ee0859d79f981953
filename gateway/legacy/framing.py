"""LCORE's query stream as a `Framing` (sans-I/O): the turn runner feeds the
`StreamRewriter` what the backend yields, exactly as for a `/v1/responses` stream
(upstream SSE bytes, or the engine's events), and this framing writes LCORE's legacy
frames (`LegacyStream`) instead of Responses frames. Decoding, repair (a stream that
ends without a terminal event, the untyped error event), enrichment and the terminal
event's settlement are the Responses stream's.

A text delta becomes its `token` straight from its bytes, in either dialect: a run of
them in one `findall` and one formatting step, one alone by one regex (its JSON string
literal is the token's). The other pass-through events and Responses lifecycle events
have no legacy frame; an output item that is done may be a `tool_call` and
`tool_result`. The Responses sequence numbers are not sent: the tokens have ids of their
own.
"""

from __future__ import annotations

import re

from gateway.legacy.stream import LegacyStream
from gateway.streaming.events import Event, Framed
from gateway.streaming.framing import Parts

_DELTA = "response.output_text.delta"
_DELTA_KIND = _DELTA.encode()
_DELTA_LITERAL = re.compile(rb'"delta":("(?:[^"\\]++|\\.)*+")')
_DELTA_KEY = b'"delta":'
_SEQUENCE_KEY = b',"sequence_number":'


class LegacyFraming:
    __slots__ = ("legacy",)
    shows_numbers = False   # tokens have ids of their own

    def __init__(self, legacy: LegacyStream):
        self.legacy = legacy

    def one(self, parts: Parts) -> bytes:
        """One pass-through block: a text delta's `token` (none for an empty delta)."""
        kind, head, number, tail = parts
        if kind != _DELTA_KIND:
            return b""
        return self.legacy.delta_event(b"%s%d%s" % (head, number, tail))

    def run(self, kind: bytes, data: bytes, start: int, stop: int, count: int) -> bytes | None:
        """A run of text deltas as their `token`s in one step; None when a block does not
        hold exactly one string delta (then each is read alone)."""
        if kind != _DELTA_KIND:
            return b""
        literals = _DELTA_LITERAL.findall(data, start, stop)
        if len(literals) != count:
            return None
        return self.legacy.deltas(literals)

    def framed(self, event: Framed) -> bytes:
        """The local engine's text delta, a whole frame whose delta is the JSON string
        literal before `sequence_number`."""
        raw = event.raw
        start = raw.rfind(_DELTA_KEY) + len(_DELTA_KEY)
        literal = raw[start:raw.rfind(_SEQUENCE_KEY)]
        return self.legacy.delta(literal) if literal != b'""' else b""

    def event(self, event: Event, number: int) -> bytes:
        kind = event.type
        if kind == _DELTA:
            if not event.parsed and event.raw is not None:
                return self.legacy.delta_event(event.raw)
            return self.legacy.event(kind, event.data)
        if kind == "response.output_item.done":
            return self.legacy.event(kind, event.data)
        return b""

    def end(self, terminal: Event, number: int, available_quotas: dict[str, int]) -> bytes:
        return self.legacy.end(terminal.data["response"], available_quotas)

    def sent(self, numbered: int) -> int:
        """The legacy events the client was sent (tokens included), not the Responses
        events numbered."""
        return self.legacy.events
