"""Server-sent events: an incremental decoder for upstream streams and the framing the
gateway writes.

The decoder finds each event's `type` without parsing its JSON: OpenAI puts `type`
first, Llama Stack puts it last, and a key right after the opening brace or right
before the closing brace is a top-level key. Anything else is parsed.
"""

from __future__ import annotations

import orjson

from gateway.streaming.events import Event

DONE_FRAME = b"data: [DONE]\n\n"
_TYPE_FIRST = b'{"type":"'
_TYPE_LAST = b',"type":"'


def event_type(payload: bytes) -> str | None:
    """The top-level `type` of a compact JSON object, if it can be read without parsing."""
    if payload.startswith(_TYPE_FIRST):
        end = payload.find(b'"', len(_TYPE_FIRST))
        if end > 0:
            return payload[len(_TYPE_FIRST):end].decode()
        return None
    if payload.endswith(b'"}'):
        start = payload.rfind(_TYPE_LAST)
        if start > 0:
            value = payload[start + len(_TYPE_LAST):-2]
            if value.find(b'"') < 0 and value.find(b"\\") < 0:  # `find`: see rewriter.feed
                return value.decode()
    return None


def frame(event_type: str, payload: bytes) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (event_type.encode(), payload)


# What a stream that sent an event the gateway cannot read ends with (issue 42): the
# upstream had the turn, so it is charged as one lost before it reported usage.
NOT_JSON = "The upstream sent an event that is not JSON."
NOT_AN_OBJECT = "The upstream sent an event that is not a JSON object."
# The largest event the gateway buffers: an upstream that never ends its event (no blank
# line) would otherwise hold memory without bound. Far past any real event (a 2 MiB reply
# in one delta is a large one).
MAX_EVENT_BYTES = 64 << 20
TOO_LARGE = "The upstream sent an event larger than 64 MiB."


class SSEDecoder:
    """Feed bytes as they arrive; get back the complete events they finish.

    Lines that are no SSE field, comments and fields other than `data` are skipped (as
    the SSE standard says); a `data` field that is not a JSON object becomes an error
    event (the stream then fails) and `malformed` says why."""

    def __init__(self) -> None:
        self._buffer = b""
        self.done = False  # the upstream sent `data: [DONE]`
        self.malformed: str | None = None  # the first event that could not be read: why

    def feed(self, chunk: bytes) -> list[Event]:
        if chunk.find(b"\r") >= 0:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        data = self._buffer + chunk if self._buffer else chunk
        blocks = data.split(b"\n\n")
        self._buffer = blocks.pop()
        events = []
        for block in blocks:
            event = self.decode(block)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[Event]:
        """An event a stream left without its final blank line; a cut-off one is dropped
        (the stream then simply ends without it)."""
        rest, self._buffer = self._buffer, b""
        payload = _data_field(rest.strip(b"\n")) if rest.strip() else None
        if payload is None or payload == b"[DONE]":
            self.done = self.done or payload is not None
            return []
        try:
            orjson.loads(payload)
        except orjson.JSONDecodeError:
            return []
        event = self.decode(rest.strip(b"\n"))
        return [event] if event is not None else []

    def decode(self, block: bytes) -> Event | None:
        """One complete block (its blank line already split off)."""
        payload: bytes | None
        if block.startswith(b"data: ") and block.find(b"\n") < 0:
            payload = block[6:]
        else:
            payload = _data_field(block)
            if payload is None:
                return None
        if payload == b"[DONE]":
            self.done = True
            return None
        kind = event_type(payload)
        if kind is not None:
            return Event(kind, payload)
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            data = self._malformed(NOT_JSON)
        if not isinstance(data, dict):
            data = self._malformed(NOT_AN_OBJECT)
        kind = data.get("type")
        return Event(kind if isinstance(kind, str) else "", None, data)


    def refuse(self, message: str) -> Event:
        """The error event for a stream the gateway stops reading (an event past
        `MAX_EVENT_BYTES`): it fails there, as at an event that is not JSON."""
        return Event("", None, self._malformed(message))

    def _malformed(self, message: str) -> dict[str, object]:
        if self.malformed is None:
            self.malformed = message
        return {"error": {"message": message, "code": "server_error"}}


def _data_field(block: bytes) -> bytes | None:
    """The joined `data:` lines of a general SSE block (comments and other fields skipped)."""
    lines = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(lines) if lines else None

