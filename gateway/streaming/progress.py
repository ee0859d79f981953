"""A background response's recorded stream, read back (sans-I/O): the frames after a
sequence number (a client resuming), and the response object as the events so far
show it (`GET /v1/responses/{id}` while it runs).

The stream is stored as the frames clients receive (`event:` and `data:` lines, one
JSON object per `data:` line, frames separated by a blank line, numbered
contiguously), so replaying is slicing: nothing is re-encoded.
"""

from __future__ import annotations

from typing import Any, Iterable

import orjson

from gateway.schema.json_types import JsonObject

_SEPARATOR = b"\n\n"


def frames_after(first_seq: int, frames: bytes, after: int) -> bytes:
    """The frames of a batch numbered `first_seq`, `first_seq + 1`, … that come after
    `after`."""
    if first_seq > after:
        return frames
    skip = after - first_seq + 1
    pieces = frames.split(_SEPARATOR)
    kept = pieces[skip:]
    return _SEPARATOR.join(kept)


def events(frames: bytes) -> Iterable[dict[str, Any]]:
    """The events of a batch of frames, parsed."""
    for frame in frames.split(_SEPARATOR):
        start = frame.find(b"data: ")
        if start >= 0:
            yield orjson.loads(frame[start + 6:])


def progress(response: JsonObject, batches: Iterable[bytes]) -> JsonObject:
    """The response as the recorded events show it: the last response object an event
    carried, with the output items added or finished since, text and arguments so far."""
    current = dict(response)
    output: list[dict[str, Any]] = list(current.get("output") or [])
    for batch in batches:
        for event in events(batch):
            kind = event.get("type", "")
            if isinstance(event.get("response"), dict):
                current = dict(event["response"])
                output = list(current.get("output") or [])
            elif kind in ("response.output_item.added", "response.output_item.done"):
                index = event["output_index"]
                output.extend({} for _ in range(index + 1 - len(output)))
                output[index] = event["item"]
            elif kind == "response.content_part.added":
                content = output[event["output_index"]].setdefault("content", [])
                content.extend({} for _ in range(event["content_index"] + 1 - len(content)))
                content[event["content_index"]] = event["part"]
            elif kind == "response.output_text.delta":
                part = output[event["output_index"]]["content"][event["content_index"]]
                part["text"] = part.get("text", "") + event["delta"]
            elif kind.endswith("_arguments.delta"):
                item = output[event["output_index"]]
                item["arguments"] = item.get("arguments", "") + event["delta"]
    current["output"] = output
    return current
