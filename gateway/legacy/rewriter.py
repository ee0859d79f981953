"""The `StreamRewriter` of a streaming query (sans-I/O): the turn runner feeds it what
the backend yields, exactly as it feeds a `/v1/responses` stream's (upstream SSE
bytes, or the engine's events), and gets LCORE's legacy frames back instead of
Responses frames. Decoding, repair (a stream that ends without a terminal event, the
untyped error event) and the terminal event's settlement are the Responses stream's;
only the framing differs (`LegacyStream`)."""

from __future__ import annotations

import re

from gateway.legacy.stream import LegacyStream
from gateway.streaming.enrich import Enricher
from gateway.streaming.events import TERMINAL_EVENTS, Event, Framed
from gateway.streaming.rewriter import StreamRewriter

_DELTA = "response.output_text.delta"
_DELTA_TYPE = b'"type":"response.output_text.delta"'
_DELTA_LITERAL = re.compile(rb'"delta":("(?:[^"\\]|\\.)*")')

# A run of text-delta blocks (blank lines included) in one dialect, as
# `streaming/passthrough.py` recognises runs: an `event:` line naming the type, `type`
# first, or `type` last (Llama Stack). Its literals are then one `findall`.
_D = re.escape(_DELTA.encode())
_EVENT_RUN = re.compile(rb'(?:event: ' + _D + rb'\ndata: \{(?:"type":"' + _D + rb'",[^\n]*|(?!"type":")[^\n]*,"type":"'
                        + _D + rb'")\}\n\n)+')
_FIRST_RUN = re.compile(rb'(?:data: \{"type":"' + _D + rb'",[^\n]*\}\n\n)+')
_LAST_RUN = re.compile(rb'(?:data: \{(?!"type":")[^\n]*,"type":"' + _D + rb'"\}\n\n)+')
_DELTA_KEY = b'"delta":'
_SEQUENCE_KEY = b',"sequence_number":'


class LegacyRewriter(StreamRewriter):
    __slots__ = ("legacy",)

    def __init__(self, enricher: Enricher, legacy: LegacyStream):
        # Every block is decoded: the Responses fast paths renumber frames this stream
        # does not send.
        super().__init__(enricher, fast=False)
        self.legacy = legacy

    @property
    def numbered(self) -> int:
        """The legacy events the client was sent (the runner's `streamed` hook counts a
        stream's events with it): this stream frames no Responses events of its own."""
        return self.legacy.events

    def _blocks(self, data: bytes) -> tuple[bytes, Event | None]:
        """`StreamRewriter._blocks` for this stream: a text delta's block (either
        dialect) becomes its `token` straight from its bytes (nothing to repair in one,
        and nothing is renumbered); every other block is decoded and repaired."""
        out: list[bytes] = []
        legacy = self.legacy
        pos = 0
        while (stop := data.find(b"\n\n", pos)) >= 0:
            if data.find(_DELTA_TYPE, pos, stop) >= 0:
                end = self._token_run(data, pos, out)
                if end:
                    pos = end
                    continue
            if data.find(_DELTA_TYPE, pos, stop) >= 0 and (match := _DELTA_LITERAL.search(data, pos, stop)):
                if match[1] != b'""':
                    out.append(legacy.delta(match[1]))
                pos = stop + 2
                continue
            event = self._decoder.decode(data[pos:stop])
            pos = stop + 2
            if event is not None:
                terminal = self._events(event, out)
                if terminal is not None:
                    return b"".join(out), terminal
        self._rest = data[pos:] if pos else data
        return b"".join(out), None

    def _token_run(self, data: bytes, pos: int, out: list[bytes]) -> int:
        """The text deltas from `pos` on, as many as follow one another, made `token`s
        in one step; where they end (0: not a run this can take, one block at a time)."""
        if data.startswith(b"event: ", pos):
            match = _EVENT_RUN.match(data, pos)
        elif data.startswith(b'data: {"type":"', pos):
            match = _FIRST_RUN.match(data, pos)
        else:
            match = _LAST_RUN.match(data, pos)
        if match is None:
            return 0
        end = match.end()
        literals = _DELTA_LITERAL.findall(data, pos, end)
        if len(literals) != data.count(b"\n\n", pos, end):
            return 0   # a block without a string delta, or with two keys: parsed one by one
        out.append(self.legacy.deltas(literals))
        return end

    def _events(self, event: Event, out: list[bytes]) -> Event | None:
        for fixed in self.repairer.feed(event):
            if fixed.type in TERMINAL_EVENTS:
                return fixed
            out.append(self._translated(fixed))
        return None

    def _translated(self, event: Event) -> bytes:
        kind = event.type
        if kind == _DELTA:
            if not event.parsed and event.raw is not None:
                return self.legacy.delta_event(event.raw)
            return self.legacy.event(kind, event.data)
        if kind == "response.output_item.done":
            return self.legacy.event(kind, self.enricher.apply(event).data)
        return b""

    def emit(self, events: list[Event]) -> bytes:
        """The local engine's events: its text deltas are whole frames whose delta is
        the JSON string literal before `sequence_number`."""
        legacy = self.legacy
        out = []
        for event in events:
            if event.__class__ is Framed:
                raw = event.raw
                assert raw is not None
                start = raw.rfind(_DELTA_KEY) + len(_DELTA_KEY)
                literal = raw[start:raw.rfind(_SEQUENCE_KEY)]
                if literal != b'""':
                    out.append(legacy.delta(literal))
            elif event.type == "response.created":
                # Nothing to repair, but the repairer keeps the response it names: an
                # interrupted turn is recorded under its id (http/query.py `stopped`).
                self.repairer.feed(event)
            else:
                # The engine's own events: nothing to repair (as `StreamRewriter.emit`).
                out.append(self._translated(event))
        return b"".join(out)

    def terminal(self, event: Event, available_quotas: dict[str, int]) -> bytes:
        self.enricher.terminal(event, available_quotas)
        return self.legacy.end(event.data["response"], available_quotas)
