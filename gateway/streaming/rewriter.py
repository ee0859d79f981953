"""Upstream SSE bytes in, client SSE bytes out (sans-I/O): decode, repair, enrich,
number and frame, in one object the relay feeds once per upstream read.

Most events of a stream are text deltas the gateway passes on unchanged but for their
`sequence_number`. They take a fast path: their type is read from the end of the
bytes, the number is patched and the frame is built in one join, with no event
object, no JSON parse and no repairer call. Everything else goes through
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
_TYPE_LAST = b',"type":"'
_SEQUENCE = re.compile(rb'"sequence_number":(\d+)')


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
        for block in blocks:
            if block.startswith(b"data: {") and block.endswith(b'"}'):
                start = block.rfind(_TYPE_LAST)
                if start > 0:
                    kind = block[start + 9:-2]
                    if kind in PASS_THROUGH:
                        number = _SEQUENCE.search(block, 6, start)
                        if number is not None:
                            out.append(b"".join((b"event: ", kind, b"\ndata: ", block[6:number.start(1)],
                                                 b"%d" % self._next, block[number.end(1):], b"\n\n")))
                            self._next += 1
                            continue
            for event in self._decoder.feed(block + b"\n\n"):
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
