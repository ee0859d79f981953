"""Upstream SSE bytes in, a client's bytes out (sans-I/O): decode, repair, enrich and
number, in one object the relay feeds once per upstream read; the transport's
`Framing` (`framing.py`: SSE by default, the WebSocket's, LCORE's query stream) turns
each event it lets through into the client's bytes.

Most events of a stream are text deltas the gateway passes on unchanged but for their
`sequence_number`; they never reach the repairer or the enricher. Three paths, the
first that applies wins (`passthrough` has the patterns, for every dialect):

1. **Runs.** Consecutive pass-through events of one type whose upstream numbers already
   equal the gateway's (the common case: a text stream before anything was inserted or
   dropped) are rewritten as a whole by C-level operations: one regex match for their
   shape and one `findall` compared with the expected numbers (when the transport shows
   them: `Framing.shows_numbers`); the framing then takes the run whole (SSE: one
   `replace` that adds the `event:` lines Llama Stack leaves out; OpenAI's blocks go out
   as they came). No Python runs per event. A read that holds one such run is
   rewritten in one step.
2. **One pass-through event** (a read of one event, as paced streams deliver them;
   numbers that differ; a shape no run pattern covers): one regex finds its type and
   digits, and the framing's `one` builds the frame (SSE: one formatting step).
3. **Everything else** goes through `SSEDecoder` → `StreamRepairer` → `Enricher`, then
   the framing's `event`. The terminal event is handed back unframed: its
   `available_quotas` needs `Settler.settle()` (`turns/settle.py`), which is I/O.

`fast=False` takes path 3 for every event: the reference the tests compare the fast
paths with, byte for byte.
"""

from __future__ import annotations

from gateway.streaming import passthrough as pt
from gateway.streaming.enrich import Enricher
from gateway.streaming.events import TERMINAL_EVENTS, Event, Framed
from gateway.streaming.framing import Framing, SSEFraming
from gateway.streaming.repair import StreamRepairer
from gateway.streaming import sse
from gateway.streaming.sse import SSEDecoder

_EVENT_LINE = b"event: "
_TYPE_FIRST = b'data: {"type":"'


class StreamRewriter:
    __slots__ = ("repairer", "enricher", "framing", "_one", "_decoder", "_next", "_rest", "_more", "_held", "_cr",
                 "_runs", "_fast")

    def __init__(self, enricher: Enricher, framing: Framing | None = None, *, fast: bool = True):
        self.repairer = StreamRepairer()
        self.enricher = enricher
        self.framing: Framing = framing if framing is not None else SSEFraming()
        self._one = self.framing.one   # looked up once, not per event
        self._decoder = SSEDecoder()
        self._next = 0          # the next sequence number the client sees
        self._rest = b""        # an incomplete block, waiting for the next read
        self._more: list[bytes] = []  # reads after it that end no block: joined once one does
        self._held = 0                # their bytes
        self._cr = False        # the last read ended with `\r`: it may be half of `\r\n`
        self._runs = fast       # off once a run's numbers did not match (they rarely will again)
                                # or the framing declined one
        self._fast = fast

    @property
    def numbered(self) -> int:
        """How many events the client was sent so far (on the Responses transports, the
        next one's sequence number)."""
        return self.framing.sent(self._next)

    @property
    def malformed(self) -> str | None:
        """Why the upstream's stream could not be read (an event that is not JSON), if so:
        the stream failed at that event."""
        return self._decoder.malformed

    @property
    def done(self) -> bool:
        return self.repairer.terminal is not None

    def feed(self, chunk: bytes) -> tuple[bytes, Event | None]:
        """The frames this read completes, and the terminal event if it arrived (unframed;
        pass it to `terminal()` once settled). Nothing after the terminal event counts."""
        if self.repairer.terminal is not None:  # `done`, without a property call per read
            return b"", None
        # `find`, not `in`: CPython 3.11's `bytes.__contains__` first tries the needle as an
        # int and raises and clears a TypeError inside (~1,800 instructions per test).
        if self._cr or chunk.find(b"\r") >= 0:
            chunk = self._line_ends(chunk)
        if self._rest:
            # A block longer than a read (a large event) is joined once, when a read ends
            # it: joining it at every read copied it read after read (quadratic: 2 MiB
            # in 4 KiB reads took seconds).
            last = self._more[-1] if self._more else self._rest
            if chunk.find(b"\n\n") < 0 and not (last.endswith(b"\n") and chunk.startswith(b"\n")):
                self._more.append(chunk)
                self._held += len(chunk)
                if self._held + len(self._rest) > sse.MAX_EVENT_BYTES:
                    return self._too_large()
                return b"", None
            if self._more:
                self._more.append(chunk)
                chunk = b"".join([self._rest, *self._more])
                self._more, self._held = [], 0
            else:
                chunk = self._rest + chunk
        elif self._fast:
            # A read that is one pass-through event, as paced streams deliver them: one
            # regex and the framing's `one`.
            match = (pt.TYPE_LAST if chunk.endswith(pt.LAST_ENDS) else pt.TYPE_FIRST).fullmatch(chunk)
            if match is not None:
                # One block, renumbered (as in `_blocks`, which says why it is inlined twice).
                if match.re is pt.TYPE_LAST:
                    head, tail, kind = match.groups()
                else:
                    head, kind, tail = match.groups()
                if head.find(pt.SEQUENCE_KEY, 0, -1) < 0 and tail.find(pt.SEQUENCE_KEY) < 0:
                    number = self._next
                    self._next = number + 1
                    return self._one((kind, head, number, tail)), None
        return self._blocks(chunk)

    def close(self) -> tuple[bytes, Event | None]:
        """The upstream stream ended: its last frames, and the terminal event to end with
        (`response.failed` if the upstream sent none; None if one was already returned)."""
        if self.done:
            return b"", None
        rest, self._rest, self._cr = b"".join([self._rest, *self._more]), b"", False
        self._more, self._held = [], 0
        out: list[bytes] = []
        # An event without its final blank line, if any (the decoder drops a cut-off one).
        for event in self._decoder.feed(rest) + self._decoder.close():
            terminal = self._events(event, out)
            if terminal is not None:
                return b"".join(out), terminal
        return b"".join(out), self.repairer.close()[0]

    def feed_events(self, events: list[Event]) -> tuple[bytes, Event | None]:
        """`feed` for a backend that yields events (the local engine): the frames of a
        read's events, and the terminal event if it is the last (unframed, as `feed`)."""
        terminal = events.pop() if events and events[-1].type in TERMINAL_EVENTS else None
        if terminal is not None:
            self.repairer.terminal = terminal  # `done`: nothing after it counts
        return self.emit(events), terminal

    def emit(self, events: list[Event]) -> bytes:
        """Frames for events the gateway made itself (the local engine's): enriched and
        numbered like the upstream's, nothing to repair (but the repairer keeps the
        response `response.created` names, as it does an upstream's: a stream stopped
        later is recorded under its id). Terminal events go through `terminal()`."""
        out: list[bytes] = []
        framing = self.framing
        for event in events:
            if event.__class__ is Framed and event.number == self._next:
                out.append(framing.framed(event))
            else:
                if event.type == "response.created":
                    self.repairer.started(event)
                out.append(framing.event(self.enricher.apply(event), self._next))
            self._next += 1
        return b"".join(out)

    def fail(self, message: str) -> Event | None:
        """The upstream broke mid-stream: the `response.failed` to end with (None if ended)."""
        failed = self.repairer.fail(message)
        return failed[0] if failed else None

    def terminal(self, event: Event, available_quotas: dict[str, int]) -> bytes:
        """Frame the settled terminal event and the end of the stream. A stream that
        ends before it began (an upstream that failed at once, or sent nothing) first
        gets the `response.created` every stream starts with, as clients require."""
        opening = b""
        if self._next == 0:
            opening = self.framing.event(self.enricher.apply(_created_for(event)), 0)
            self._next = 1
        self.enricher.terminal(event, available_quotas)
        number = self._next
        self._next = number + 1
        return opening + self.framing.end(event, number, available_quotas)

    def _too_large(self) -> tuple[bytes, Event | None]:
        """An event past `MAX_EVENT_BYTES`: dropped, and the stream fails there."""
        self._rest, self._more, self._held = b"", [], 0
        out: list[bytes] = []
        return b"".join(out), self._events(self._decoder.refuse(sse.TOO_LARGE), out)

    def _line_ends(self, chunk: bytes) -> bytes:
        """`\\r\\n` and lone `\\r` as `\\n`, including a `\\r\\n` split across two reads."""
        if self._cr:
            self._cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if chunk.endswith(b"\r"):
            self._cr = True  # counted as a line end now; a `\n` starting the next read is its other half
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _blocks(self, data: bytes) -> tuple[bytes, Event | None]:
        """The frames of the complete blocks in `data`; the rest waits for the next read.
        A read that is one run, or one pass-through event, costs one pass of this loop
        (and `b"".join` of one item returns it without a copy)."""
        out: list[bytes] = []
        fast, starts, ends = self._fast, pt.STARTS, pt.ENDS
        pos = 0
        while (stop := data.find(b"\n\n", pos)) >= 0:
            if fast:
                if data.startswith(starts, pos):
                    match = pt.TYPE_FIRST.match(data, pos) or pt.TYPE_LAST.match(data, pos)
                elif data.endswith(ends, pos, stop):
                    match = pt.TYPE_LAST.match(data, pos)
                else:
                    match = None
                if match is not None:
                    # Two or more blocks ahead: a run may take them all at once.
                    if self._runs and data.find(b"\n\n", stop + 2) >= 0:
                        run = self._run(data, pos)
                        if run is not None:
                            pos = run[0]
                            out.append(run[1])
                            continue
                    # One block, renumbered, unless its sequence number key occurs twice
                    # (the slow path then parses it to tell which one is the event's).
                    # Inlined here and in `feed`, not a method: the framing's `one` is a
                    # call of its own, and an event then runs no more calls than before
                    # the framing was split off (issue 40; `python -m bench.instructions`,
                    # paced: 23,185 → 23,056 instructions per event; a `_framed` method
                    # calling `one` cost ~300 more).
                    if match.re is pt.TYPE_LAST:
                        head, tail, kind = match.groups()
                    else:
                        head, kind, tail = match.groups()
                    if head.find(pt.SEQUENCE_KEY, 0, -1) < 0 and tail.find(pt.SEQUENCE_KEY) < 0:
                        number = self._next
                        self._next = number + 1
                        out.append(self._one((kind, head, number, tail)))
                        pos = match.end()
                        continue
            event = self._decoder.decode(data[pos:stop])
            pos = stop + 2
            if event is not None:
                terminal = self._events(event, out)
                if terminal is not None:
                    return b"".join(out), terminal
        self._rest = data[pos:] if pos else data
        return b"".join(out), None

    def _run(self, data: bytes, pos: int) -> tuple[int, bytes] | None:
        """Where a run of pass-through blocks starting at `pos` ends, and its frames; None
        if there is none, its numbers are not the gateway's or the framing cannot take a
        run (then `_runs` goes off)."""
        if data.startswith(_EVENT_LINE, pos):
            match = pt.EVENT_RUN.match(data, pos)
        elif data.startswith(_TYPE_FIRST, pos):
            match = pt.FIRST_RUN.match(data, pos)
        else:
            match = pt.LAST_RUN.match(data, pos)
        if match is None:
            return None
        stop = match.end()
        count = data.count(b"\n\n", pos, stop)
        first = self._next
        # A transport that shows no sequence numbers (LCORE's) skips reading them: a
        # `findall` over the whole run, most of a run's cost.
        if self.framing.shows_numbers:
            numbers = pt.SEQUENCE.findall(data, pos, stop)
            if len(numbers) != count or numbers != list(map(pt.DIGITS, range(first, first + count))):
                self._runs = False
                return None
        framed = self.framing.run(match[1], data, pos, stop, count)
        if framed is None:
            self._runs = False
            return None
        self._next = first + count
        return stop, framed

    def _events(self, event: Event, out: list[bytes]) -> Event | None:
        for fixed in self.repairer.feed(event):
            if fixed.type in TERMINAL_EVENTS:
                return fixed
            number = self._next
            self._next = number + 1
            out.append(self.framing.event(self.enricher.apply(fixed), number))
        return None


def _created_for(terminal: Event) -> Event:
    response = {**terminal.data["response"], "status": "in_progress", "error": None}
    return Event.build({"type": "response.created", "sequence_number": 0, "response": response})
