"""SSE frames of Llama Stack 0.7.3's /v1/responses stream, quirks included.

Framing: only `data: {json}\\n\\n` lines with `type` last; no `event:` lines, no
`data: [DONE]`. The `openai` dialect (`--dialect openai`, or the `scripted_dialect`
knob) frames the same events as OpenAI does: an `event:` line, then `type` first and
`sequence_number` last; the quirks below stay (they are about which events are sent).
Every event is rendered once to bytes with orjson (compact, key order as recorded);
text deltas, the bulk of any stream, are spliced from pre-rendered pieces.

Quirks reproduced (reference §7 "Streaming"):
* no `response.output_text.done`;
* `output_text.delta` has no `response_id`; content_part/output_item events do;
* file_search: a skipped sequence number, then `function_call_arguments.delta/done`
  BEFORE `output_item.added(file_search_call)` whose `queries` holds the raw argument JSON;
* MCP: `mcp_list_tools.*` and `mcp_call.completed`/`.failed` carry only sequence_number
  and type; a failed call's item has its `error` as a string;
  a skipped sequence number; argument deltas typed `response.function_call_arguments.delta`;
  the misnamed `response.mcp_call.arguments.done`;
* errors: `response.failed` with `{"code":"server_error","message":...}`, or the untyped
  `{"error": {...}}` event (json.dumps spacing, no sequence_number).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from .engine import Step
from .model import chunk16, split_words

_dumps = orjson.dumps


def frame(event: dict[str, Any]) -> bytes:
    return b"data: " + _dumps(event) + b"\n\n"


def openai_frame(kind: str, event: dict[str, Any], seq: int) -> bytes:
    return (b"event: " + kind.encode() + b"\ndata: "
            + _dumps({"type": kind, **event, "sequence_number": seq}) + b"\n\n")


def untyped_error_frame(message: str, code: str) -> bytes:
    # Llama Stack writes this one with json.dumps (spaces after separators).
    return b"data: " + json.dumps({"error": {"message": message, "code": code}}).encode() + b"\n\n"


class EventWriter:
    """Owns the sequence numbers of one stream and collects its frames."""

    __slots__ = ("seq", "frames", "_rid", "_openai")

    def __init__(self, response_id: str, dialect: str = "llama-stack") -> None:
        self.seq = 0
        self.frames: list[bytes] = []
        self._rid = response_id
        self._openai = dialect == "openai"

    def skip(self) -> None:
        """Llama Stack bumps the counter for an event it then suppresses."""
        self.seq += 1

    def emit(self, event: dict[str, Any], kind: str) -> None:
        if self._openai:
            self.frames.append(openai_frame(kind, event, self.seq))
        else:
            event["sequence_number"] = self.seq
            event["type"] = kind
            self.frames.append(frame(event))
        self.seq += 1

    def response_event(self, response_json: bytes, kind: str) -> None:
        """created / in_progress / completed / failed: splice the rendered response."""
        name, seq = kind.encode(), str(self.seq).encode()
        if self._openai:
            self.frames.append(b"event: " + name + b'\ndata: {"type":"' + name + b'","response":'
                               + response_json + b',"sequence_number":' + seq + b"}\n\n")
        else:
            self.frames.append(b'data: {"response":' + response_json + b',"sequence_number":'
                               + seq + b',"type":"' + name + b'"}\n\n')
        self.seq += 1

    def item_added(self, index: int, item: dict[str, Any]) -> None:
        self.emit({"response_id": self._rid, "item": item, "output_index": index},
                  "response.output_item.added")

    def item_done(self, index: int, item: dict[str, Any]) -> None:
        self.emit({"response_id": self._rid, "item": item, "output_index": index},
                  "response.output_item.done")

    # -- one method per output item kind ---------------------------------------------

    def message(self, index: int, step: Step, limit: int | None = None) -> None:
        """A text message; `limit` stops after that many deltas (break-stream)."""
        item = step.item
        item_id = item["id"]
        text = item["content"][0]["text"]
        self.item_added(index, {"content": [], "role": "assistant", "type": "message",
                                "id": item_id, "status": "in_progress"})
        self._part(index, item_id, "", "response.content_part.added")
        pieces = step.pieces if step.pieces is not None else split_words(text)
        if limit is not None:
            pieces = pieces[:limit]
        if self._openai:
            head = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                    b'"content_index":0,"delta":')
            end = b"}\n\n"
        else:
            head = b'data: {"content_index":0,"delta":'
            end = b',"type":"response.output_text.delta"}\n\n'
        tail = (b',"item_id":' + _dumps(item_id) + b',"logprobs":[],"output_index":'
                + str(index).encode() + b',"sequence_number":')
        seq = self.seq
        frames = self.frames
        for piece in pieces:
            frames.append(head + _dumps(piece) + tail + str(seq).encode() + end)
            seq += 1
        self.seq = seq
        if limit is not None:
            return
        self._part(index, item_id, text, "response.content_part.done")
        self.item_done(index, item)

    def _part(self, index: int, item_id: str, text: str, kind: str) -> None:
        self.emit({"content_index": 0, "response_id": self._rid, "item_id": item_id,
                   "output_index": index,
                   "part": {"type": "output_text", "text": text, "annotations": [],
                            "logprobs": []}}, kind)

    def _argument_deltas(self, index: int, item_id: str, arguments: str) -> None:
        for piece in chunk16(arguments):
            self.emit({"delta": piece, "item_id": item_id, "output_index": index},
                      "response.function_call_arguments.delta")

    def function_call(self, index: int, step: Step) -> None:
        item = step.item
        self.item_added(index, {**item, "arguments": "", "status": "in_progress"})
        self._argument_deltas(index, item["id"], item["arguments"])
        self.emit({"arguments": item["arguments"], "item_id": item["id"], "output_index": index},
                  "response.function_call_arguments.done")
        self.item_done(index, item)

    def file_search(self, index: int, step: Step) -> None:
        item = step.item
        item_id = item["id"]
        args = step.arguments or ""
        self.skip()
        self._argument_deltas(index, item_id, args)
        self.emit({"arguments": args, "item_id": item_id, "output_index": index},
                  "response.function_call_arguments.done")
        self.item_added(index, {"id": item_id, "queries": [args], "status": "in_progress",
                                "type": "file_search_call", "results": None})
        for phase in ("in_progress", "searching", "completed"):
            self.emit({"item_id": item_id, "output_index": index},
                      "response.file_search_call." + phase)
        self.item_done(index, item)

    def mcp_list(self, index: int, step: Step) -> None:
        item = step.item
        self.emit({}, "response.mcp_list_tools.in_progress")
        self.item_added(index, {**item, "tools": []})
        self.emit({}, "response.mcp_list_tools.completed")
        self.item_done(index, item)

    def _mcp_arguments(self, index: int, item_id: str, args: str) -> None:
        self.skip()
        self._argument_deltas(index, item_id, args)
        self.emit({"arguments": args, "item_id": item_id, "output_index": index},
                  "response.mcp_call.arguments.done")

    def mcp_call(self, index: int, step: Step) -> None:
        item = step.item
        self._mcp_arguments(index, item["id"], item["arguments"])
        self.item_added(index, {**item, "arguments": "", "error": None, "output": None})
        self.emit({"item_id": item["id"], "output_index": index}, "response.mcp_call.in_progress")
        if step.hangs:
            return  # the server vanished: Llama Stack sends nothing more
        self.emit({}, "response.mcp_call.failed" if item["error"] else "response.mcp_call.completed")
        self.item_done(index, item)

    def approval(self, index: int, step: Step) -> None:
        item = step.item
        self._mcp_arguments(index, step.args_item_id or item["id"], item["arguments"])
        self.item_added(index, item)
        self.item_done(index, item)

    def steps(self, steps: list[Step]) -> None:
        for index, step in enumerate(steps):
            getattr(self, _RENDERERS[step.kind])(index, step)


_RENDERERS = {"message": "message", "function_call": "function_call",
              "file_search": "file_search", "mcp_list": "mcp_list", "mcp_call": "mcp_call",
              "approval": "approval"}
