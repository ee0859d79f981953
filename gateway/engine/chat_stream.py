"""A Chat Completions SSE body, decoded (sans-I/O).

Most chunks of a stream are a piece of text and nothing else. Those are recognised by
one regular expression over their bytes and handed on as the JSON string literal of
the piece (consecutive ones in one list), which the emitter copies into its delta event unparsed
(docs/architecture.md, decision 2: the hot path does not parse what it does not change).
Every other chunk (role, tool calls, reasoning, finish, usage, errors)
is parsed into a dict. The expression only matches when every top-level key besides
`choices` holds a scalar, so a literal it returns is the one choice's whole delta.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.streaming import sse
from gateway.streaming.sse import SSEDecoder

_SCALAR = rb'(?:"[^"\\]*"|-?[0-9][0-9.eE+-]*|null|true|false)'
_TEXT_CHUNK = re.compile(
    rb'data: ?\{(?:"[a-z_]+":' + _SCALAR + rb',)*'
    rb'"choices":\[\{"index":0,"delta":\{(?:"role":"assistant",)?"content":("(?:[^"\\]++|\\.)*+")\},'
    rb'"logprobs":null,"finish_reason":null\}\]'
    rb'(?:,"[a-z_]+":' + _SCALAR + rb')*\}')

# A parsed chunk, or the JSON string literals of consecutive text pieces.
Chunk = dict[str, Any] | list[bytes]


class ChatDecoder:
    __slots__ = ("_sse", "_rest", "_more", "_held")

    def __init__(self) -> None:
        self._sse = SSEDecoder()
        self._rest = b""
        self._more: list[bytes] = []  # reads that end no chunk, after `_rest`: joined once one does
        self._held = 0                # their bytes

    def feed(self, data: bytes) -> list[Chunk]:
        if data.find(b"\r") >= 0:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._rest:
            # A chunk longer than a read is joined once (as `StreamRewriter.feed` does).
            last = self._more[-1] if self._more else self._rest
            if data.find(b"\n\n") < 0 and not (last.endswith(b"\n") and data.startswith(b"\n")):
                self._more.append(data)
                self._held += len(data)
                if self._held + len(self._rest) > sse.MAX_EVENT_BYTES:
                    # Dropped: the stream fails there (`malformed` says why).
                    self._rest, self._more, self._held = b"", [], 0
                    return [self._sse.refuse(sse.TOO_LARGE).data]
                return []
            if self._more:
                self._more.append(data)
                data = b"".join([self._rest, *self._more])
                self._more, self._held = [], 0
            else:
                data = self._rest + data
        out: list[Chunk] = []
        pos = 0
        match, decode = _TEXT_CHUNK.fullmatch, self._sse.decode
        run: list[bytes] | None = None  # consecutive text pieces go on as one list
        while (stop := data.find(b"\n\n", pos)) >= 0:
            found = match(data, pos, stop)
            if found is not None:
                if run is None:
                    run = []
                    out.append(run)
                run.append(found[1])
            else:
                run = None
                event = decode(data[pos:stop])
                if event is not None:
                    out.append(event.data)
            pos = stop + 2
        self._rest = data[pos:]
        return out

    @property
    def done(self) -> bool:
        """The stream said `data: [DONE]`."""
        return self._sse.done

    @property
    def malformed(self) -> str | None:
        """Why an event could not be read (not JSON), if one could not: its chunk is an
        error chunk."""
        return self._sse.malformed

    def close(self) -> list[Chunk]:
        """A last chunk without its blank line, if the body ended with one."""
        rest, self._rest = b"".join([self._rest, *self._more]), b""
        self._more, self._held = [], 0
        return [event.data for event in self._sse.feed(rest) + self._sse.close()]
