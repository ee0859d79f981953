"""Responses stream events in, LCORE's `/v1/streaming_query` frames out (sans-I/O;
lcore.md 2.4 and 13, with LCORE main's endings from issue 20).

JSON mode frames every event as one `data: {"event": <name>, "data": {...}}` line (no
`event:` field, no `[DONE]`), with LCORE's `json.dumps` spacing; `text/plain` mode
writes the text only (`serialize_text`). Order: `start`, then `token`s numbered from
0 interleaved with `tool_call` / `tool_result`, then by how the turn ended:

- completed: `turn_complete` (the next number, the full text), `end`;
- stopped for length, a content filter, or cancelled upstream: `turn_complete` (for a
  content filter the refusal), `error` (413 `Prompt is too long`, or 500 `Error while
  processing query` with the reason), `end`: the turn is charged and stored;
- failed: `error` only, no `end`;
- interrupted by the user: one last `token` closing the markdown with
  `*Response stopped by the user.*`, then `interrupted`, no `end`.

A text delta is translated from its bytes (its JSON string literal is the token's),
never parsed: the hot path of a legacy stream.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

import orjson

from gateway.legacy.items import referenced_documents, tool_call, tool_result
from gateway.schema.errors import ApiError, prompt_too_long
from gateway.schema.json_types import JsonObject

_DELTA = re.compile(rb'"delta":("(?:[^"\\]++|\\.)*+")')
_TOKEN = b'data: {"event": "token", "data": {"id": %d, "token": %s}}\n\n'
STOPPED_BY_USER = "\n\n*Response stopped by the user.*"
CONTENT_POLICY = "The model refused to generate a response due to content policy."
CANCELLED = "The response was cancelled before completion."
QUERY_FAILED = "Error while processing query"
INTERRUPTED_REASON = "interrupted"   # an interrupted turn's `incomplete_details.reason`


def _frame(event: str, data: Any, **beside: Any) -> bytes:
    return b"data: %s\n\n" % json.dumps({"event": event, "data": data, **beside}).encode()


def failure(status: str, response: JsonObject, model: str | None) -> ApiError | None:
    """The error a turn that did not complete ends with (None: it completed). Shared
    with `/v1/query`, which answers it as the HTTP status."""
    if status in ("completed", "requires_action"):
        return None
    error = response.get("error") or {}
    message = str(error.get("message") or "") if isinstance(error, dict) else str(error)
    reason = (response.get("incomplete_details") or {}).get("reason")
    if status == "cancelled":
        return ApiError(500, QUERY_FAILED, CANCELLED, code="cancelled")
    if status == "incomplete":
        if reason == "content_filter":
            return ApiError(500, QUERY_FAILED, CONTENT_POLICY, code="content_filter")
        return prompt_too_long(model)
    if "context_length" in message or "context length" in message:
        return prompt_too_long(model)
    return ApiError(500, QUERY_FAILED, message or "The response failed.", code="query_failed")


def answer_text(response: JsonObject) -> str:
    """The assistant's text, or its refusal when it has no text (a content filter)."""
    texts, refusals = [], []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict):
                    if part.get("type") == "output_text":
                        texts.append(part.get("text") or "")
                    elif part.get("type") == "refusal":
                        refusals.append(part.get("refusal") or "")
    return "".join(texts) or "".join(refusals)


def interrupted_response(response: JsonObject, text: str) -> JsonObject:
    """What a stream its user interrupted is recorded as: the response so far, with the
    partial answer and no usage (charged as an abandoned turn)."""
    message = {"type": "message", "role": "assistant", "status": "incomplete",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {**response, "status": "incomplete", "error": None, "incomplete_details": {"reason": INTERRUPTED_REASON},
            "output": [message] if text else [], "usage": None}


class LegacyStream:
    """One streaming query's translator: feed it the turn's Responses events, get its
    legacy frames."""

    __slots__ = ("text", "conversation_id", "request_id", "model", "_next", "_others", "_literals", "_items",
                 "_round")

    def __init__(self, conversation_id: str | None, request_id: str, model: str | None, text: bool = False):
        self.text = text                    # `media_type: text/plain`
        self.conversation_id = conversation_id
        self.request_id = request_id
        self.model = model                  # `provider/model`, named by a 413's cause
        self._next = 0                      # the next token id
        self._others = 0                    # events written other than tokens
        self._literals: list[bytes] = []    # the text so far, as JSON string literals
        self._items: list[dict[str, Any]] = []  # finished tool items (referenced documents)
        self._round = 0

    @property
    def events(self) -> int:
        """How many events the client was sent so far (tokens included)."""
        return self._next + self._others

    def start(self) -> bytes:
        if self.text:
            return b""
        self._others += 1
        return _frame("start", {"conversation_id": self.conversation_id, "request_id": self.request_id})

    def deltas(self, literals: list[bytes]) -> bytes:
        """A run of text deltas as their JSON string literals: their `token`s, made by
        C-level calls (no Python runs per token: the hot path of a legacy stream)."""
        if b'""' in literals:
            literals = [literal for literal in literals if literal != b'""']
        first = self._next
        self._next = first + len(literals)
        self._literals.extend(literals)
        if self.text:
            return "".join(map(orjson.loads, literals)).encode()
        return b"".join(map(_TOKEN.__mod__, zip(range(first, self._next), literals)))

    def delta(self, literal: bytes) -> bytes:
        """A text delta as its JSON string literal: one `token`."""
        self._literals.append(literal)
        number = self._next
        self._next = number + 1
        if self.text:
            text: str = orjson.loads(literal)   # a JSON string the engine wrote
            return text.encode()
        return _TOKEN % (number, literal)

    def delta_event(self, raw: bytes) -> bytes:
        """A `response.output_text.delta` event's JSON bytes."""
        match = _DELTA.search(raw)
        if match is None:
            return self.event("response.output_text.delta", orjson.loads(raw))
        return self.delta(match[1]) if match[1] != b'""' else b""

    def event(self, kind: str, data: dict[str, Any]) -> bytes:
        """Any other non-terminal event, parsed."""
        if kind == "response.output_text.delta":
            delta = data.get("delta")
            return self.delta(orjson.dumps(delta)) if isinstance(delta, str) and delta else b""
        if kind != "response.output_item.done":
            return b""
        item = data.get("item")
        if not isinstance(item, dict):
            return b""
        call = tool_call(item)
        if call is None:
            return b""
        out = [self._out("tool_call", call)]
        if item.get("type") not in ("function_call", "mcp_approval_request"):
            self._round += 1
            result = tool_result(item, self._round)
            if result is not None:
                out.append(self._out("tool_result", result))
            self._items.append(item)
        return b"".join(out)

    def partial_text(self) -> str:
        return "".join(orjson.loads(literal) for literal in self._literals)

    def end(self, response: JsonObject, available_quotas: dict[str, int]) -> bytes:
        """The settled terminal response object: the frames that end the stream."""
        status = str(response.get("status") or "failed")
        error = failure(status, response, self.model)
        if status == "failed" or (error is not None and status not in ("incomplete", "cancelled")):
            assert error is not None
            return self._error(error)
        out = [self._out("turn_complete", {"id": self._next, "token": answer_text(response)})]
        if error is not None:
            out.append(self._error(error))
        usage = response.get("usage") or {}
        documents = referenced_documents(self._items)
        if self.text:
            lines = [f"{doc['doc_title']}: {doc['doc_url']}" for doc in documents
                     if doc.get("doc_title") and doc.get("doc_url")]
            out.append(("\n\n---\n\n" + "\n".join(lines)).encode() if lines else b"")
        else:
            self._others += 1
            out.append(_frame("end", {"referenced_documents": documents, "truncated": None,
                                      "input_tokens": int(usage.get("input_tokens") or 0),
                                      "output_tokens": int(usage.get("output_tokens") or 0)},
                              available_quotas=available_quotas))
        return b"".join(out)

    def interrupted(self) -> bytes:
        """The user stopped the stream: a closing token, then `interrupted`."""
        closing = "\n```" if self.partial_text().count("```") % 2 else ""
        token = self.delta(orjson.dumps(closing + STOPPED_BY_USER))
        if self.text:
            return token
        self._others += 1
        return token + _frame("interrupted", {"request_id": self.request_id})

    def _error(self, error: ApiError) -> bytes:
        self._others += 1
        if self.text:
            return f"Status: {error.status} - {error.response} - {error.cause}".encode()
        return _frame("error", {"status_code": error.status, "response": error.response, "cause": error.cause})

    def _out(self, event: str, data: Mapping[str, Any]) -> bytes:
        if not self.text:
            self._others += 1
            return _frame(event, data)
        if event == "tool_call":
            self._others += 1
            return f"[Tool Call: {data['name']}]\n".encode()
        if event == "tool_result":
            self._others += 1
            return b"[Tool Result]\n"
        return b""
