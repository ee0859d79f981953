"""How a transport writes a stream's events: the one protocol between the
`StreamRewriter` (decode → repair → enrich → number) and the bytes a client gets, and
its SSE implementation (sans-I/O).

The rewriter hands a framing every event it lets through, already repaired, enriched
and numbered, in one of four shapes; the framing returns the bytes for the client (or
`b""` for an event its transport does not show):

- `event(event, number)`: any event the rewriter decoded or made (the slow path);
- `one((kind, head, number, tail))`: one pass-through block the rewriter recognised
  without parsing it (`passthrough.py`): its JSON is `head`, the number, `tail`;
- `run(kind, data, start, stop, count)`: `count` consecutive pass-through blocks of one
  kind, `data[start:stop]` as they came (the `data:` lines and blank lines; not sliced
  for a framing that need not copy them), whose upstream numbers already are the
  client's (read only when the framing `shows_numbers`);
  None when the transport cannot take them at once (the rewriter then takes them one
  by one and stops looking for runs);
- `framed(event)`: a local-engine event made as a whole SSE frame (`events.Framed`),
  numbered as the stream's next;

and the stream's end, `end(terminal, number, available_quotas)`, the settled terminal
event. `sent(numbered)` says how many events the client was sent when the rewriter
numbered `numbered` (the runner's `streamed` hook counts them).

`one` and `framed` are read-only callables rather than methods so that SSE's can be
C-level ones (`partial(operator.mod, template)`: the plain version is
`b"event: %s\\ndata: %s%d%s\\n\\n" % parts`; `attrgetter("raw")`: `event.raw`), and the
rewriter recognises a pass-through block inline where it calls `one`: a paced SSE event
runs no Python call more than when the rewriter framed SSE itself (issue 40,
`python -m bench.instructions`, paced: 23,185 → 23,056 instructions per event in Llama
Stack's dialect, 23,228 → 23,153 in OpenAI's; a bound `bytes.__mod__` called from a
method cost ~380 more).

Implementations: `SSEFraming` here (the rewriter's default), `WebSocketFraming`
(`streaming/websocket.py`) and LCORE's query stream (`legacy/framing.py`).
"""

from __future__ import annotations

from functools import partial
from operator import attrgetter, mod
from typing import Callable, Protocol

from gateway.streaming.events import Event, Framed
from gateway.streaming.sse import DONE_FRAME

# A pass-through block's parts: its kind, its JSON up to the sequence number's digits,
# the number the client sees, and its JSON after the digits.
Parts = tuple[bytes, bytes, int, bytes]


class Framing(Protocol):
    # Whether the client sees the Responses sequence numbers (False: LCORE's query
    # stream, whose runs the rewriter then takes without reading their numbers).
    shows_numbers: bool

    # Read-only: a method or a C-level callable the class holds.
    @property
    def one(self) -> Callable[[Parts], bytes]: ...

    @property
    def framed(self) -> Callable[[Framed], bytes]: ...

    def event(self, event: Event, number: int) -> bytes: ...

    def run(self, kind: bytes, data: bytes, start: int, stop: int, count: int) -> bytes | None: ...

    def end(self, terminal: Event, number: int, available_quotas: dict[str, int]) -> bytes: ...

    def sent(self, numbered: int) -> int: ...


_SSE_BLOCK = b"event: %s\ndata: %s%d%s\n\n"


class SSEFraming:
    """Server-sent events as `/v1/responses` writes them: an `event:` line naming the
    type, the JSON on one `data:` line, and `data: [DONE]` after the terminal event."""

    __slots__ = ()

    shows_numbers = True
    # C-level callables (see the module's docstring): the plain `one` is
    # `_SSE_BLOCK % parts`, the plain `framed` is `event.raw` (the engine's frame is already
    # this transport's frame).
    one = staticmethod(partial(mod, _SSE_BLOCK))
    framed = staticmethod(attrgetter("raw"))

    def event(self, event: Event, number: int) -> bytes:
        return b"event: %s\ndata: %s\n\n" % (event.type.encode(), event.payload(number))

    def run(self, kind: bytes, data: bytes, start: int, stop: int, count: int) -> bytes:
        blocks = data[start:stop] if start or stop < len(data) else data
        if blocks[0] == 101:  # `e`: blocks that name their type already go out as they came
            return blocks
        line = b"\n\nevent: " + kind + b"\ndata: "
        return line[2:-6] + blocks.replace(b"\n\ndata: ", line)

    def end(self, terminal: Event, number: int, available_quotas: dict[str, int]) -> bytes:
        return self.event(terminal, number) + DONE_FRAME

    def sent(self, numbered: int) -> int:
        return numbered
