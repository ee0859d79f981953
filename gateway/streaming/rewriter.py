"""Upstream SSE bytes in, client SSE bytes out (sans-I/O): decode, repair, enrich,
number and frame, in one object the relay feeds once per upstream read.

Most events of a stream are text deltas the gateway passes on unchanged but for their
`sequence_number`. They take a fast path: one anchored regular expression reads their
type and finds the number's digits, and the frame is built in one formatting step,
with no event object, no JSON parse and no repairer call. Everything else goes through
`SSEDecoder` → `StreamRepairer` → `Enricher`. The terminal event is handed back
unframed: its `available_quotas` needs `pipeline.settle()`, which is I/O.
"""

from __future__ import annotations

import re

from gateway.streaming.enrich import Enricher
from gateway.streaming.events import TERMINAL_EVENTS, Event
from gateway.streaming.repair import StreamRepairer
from gateway.streaming.sse import DONE_FRAME, SSEDecoder, frame

# Event types no stage changes (the repairer and enricher pass them through).
PASS_THROUGH = frozenset({
    b"response.output_text.delta", b"response.refusal.delta", b"response.reasoning_text.delta",
    b"response.reasoning_summary_text.delta", b"response.content_part.added",
    b"response.output_text.annotation.added",
})
# Cheap first test before the regex: the endings a pass-through type can have.
_ENDINGS = tuple({kind[kind.rfind(b".") + 1:] + b'"}' for kind in PASS_THROUGH})
_KINDS = b"|".join(re.escape(kind) for kind in sorted(PASS_THROUGH))
# One anchored match per block finds the type and the sequence number's digits. Llama
# Stack writes `type` last, OpenAI first. Text inside a string escapes its quotes
# (`\"`), so it can never match `"sequence_number":` or the `"type"` key.
_TYPE_LAST = re.compile(rb'data: (\{[^\n]*"sequence_number":)\d+(,"type":"(' + _KINDS + rb')"\})')
_TYPE_FIRST = re.compile(rb'data: (\{"type":"(' + _KINDS + rb')",[^\n]*"sequence_number":)\d+((?:,[^\n]*)?\})')


class StreamRewriter:
    def __init__(self, enricher: Enricher):
        self.repairer = StreamRepairer()
        self.enricher = enricher
        self._decoder = SSEDecoder()
        self._next = 0
        self._rest = b""

    @property
    def done(self) -> bool:
        return self.repairer.terminal is not None

    def feed(self, chunk: bytes) -> tuple[bytes, Event | None]:
        """The frames this read completes, and the terminal event if it arrived (unframed;
        pass it to `terminal()` once settled). Nothing after the terminal event counts."""
        if self.done:
            return b"", None
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        blocks = (self._rest + chunk if self._rest else chunk).split(b"\n\n")
        self._rest = blocks.pop()
        out: list[bytes] = []
        type_last, type_first = _TYPE_LAST.fullmatch, _TYPE_FIRST.fullmatch
        for block in blocks:
            if block.endswith(_ENDINGS):
                match = type_last(block)
                if match is not None:
                    out.append(b"event: %s\ndata: %s%d%s\n\n" % (match[3], match[1], self._next, match[2]))
                    self._next += 1
                    continue
            if block.startswith(b'data: {"type":"'):
                match = type_first(block)
                if match is not None:
                    out.append(b"event: %s\ndata: %s%d%s\n\n" % (match[2], match[1], self._next, match[3]))
                    self._next += 1
                    continue
            event = self._decoder.decode(block)
            if event is not None:
                terminal = self._events(event, out)
                if terminal is not None:
                    return b"".join(out), terminal
        return b"".join(out), None

    def close(self) -> tuple[bytes, Event | None]:
        """The upstream stream ended: its last frames, and the terminal event to end with
        (`response.failed` if the upstream sent none; None if one was already returned)."""
        if self.done:
            return b"", None
        out: list[bytes] = []
        self._decoder.feed(self._rest)  # an event without its final blank line, if any
        self._rest = b""
        for event in self._decoder.close():
            terminal = self._events(event, out)
            if terminal is not None:
                return b"".join(out), terminal
        return b"".join(out), self.repairer.close()[0]

    def fail(self, message: str) -> Event | None:
        """The upstream broke mid-stream: the `response.failed` to end with (None if ended)."""
        failed = self.repairer.fail(message)
        return failed[0] if failed else None

    def terminal(self, event: Event, available_quotas: dict[str, int]) -> bytes:
        """Frame the settled terminal event and the end of the stream."""
        self.enricher.terminal(event, available_quotas)
        return self._frame(event) + DONE_FRAME

    def _events(self, event: Event, out: list[bytes]) -> Event | None:
        for fixed in self.repairer.feed(event):
            if fixed.type in TERMINAL_EVENTS:
                return fixed
            out.append(self._frame(self.enricher.apply(fixed)))
        return None

    def _frame(self, event: Event) -> bytes:
        payload = event.payload(self._next)
        self._next += 1
        return frame(event.type, payload)
