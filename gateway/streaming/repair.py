"""Repair an upstream Responses stream into a valid OpenResponses stream (sans-I/O).

Feed events in, get events out; no sockets, clocks or databases. The repairs, each
seen in Llama Stack 0.7.3's captures:

- `response.output_text.done` is missing: synthesised before `content_part.done`.
- An untyped `{"error": {...}}` event (or OpenAI's typed `error` event): becomes
  `response.failed`, so every stream ends with a response object clients can read.
- The stream ends with no terminal event: `close()` ends it with `response.failed`.
- Tool arguments streamed before the tool's `output_item.added`, under the
  function-call type: an MCP call's arguments are re-emitted after its
  `output_item.added` as `response.mcp_call_arguments.delta`/`.done` (also fixing the
  misnamed `response.mcp_call.arguments.done`); file_search and approval requests,
  for which OpenAI streams no arguments, have them dropped (the queries are in the
  item, and `queries` holding the raw JSON argument string is parsed).
- MCP progress events without `item_id`/`output_index` are completed from the open
  item they belong to, or dropped when there is none. `mcp_list_tools.in_progress`,
  which comes before its item, is held until the item is announced.
- Response objects get the fields the `openai` types require but the upstream omits
  (usage details, a valid error code), and `incomplete_details.reason` in OpenAI's
  terms (Llama Stack says `length`: `max_output_tokens`).
- A failed MCP call's `error` is a string where the `openai` types have an object
  (McpToolCallError), wherever an `mcp_call` item appears: a response's `output`,
  `output_item.added`/`.done`, and `input_items` (which replay earlier turns' output):
  mapped by `mcp_errors.mcp_call_error`.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.schema.json_types import JsonObject
from gateway.streaming.events import RESPONSE_EVENTS, TERMINAL_EVENTS, Event
from gateway.streaming.mcp_errors import mcp_call_error

_ARGUMENT_EVENTS = frozenset({"response.function_call_arguments.delta", "response.function_call_arguments.done",
                              "response.mcp_call.arguments.done", "response.mcp_call_arguments.delta",
                              "response.mcp_call_arguments.done"})
_MCP_LIST_EVENTS = frozenset({"response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
                              "response.mcp_list_tools.failed"})
_MCP_CALL_EVENTS = frozenset({"response.mcp_call.in_progress", "response.mcp_call.completed",
                              "response.mcp_call.failed"})
_SNAPSHOT_KEYS = ("id", "object", "created_at", "model", "parallel_tool_calls", "tool_choice", "tools",
                  "previous_response_id", "instructions", "metadata", "store")
_ITEM_ID = re.compile(rb'"item_id":\s*"([^"\\]+)"')
RESPONSE_ERROR_CODES = frozenset({
    "server_error", "rate_limit_exceeded", "invalid_prompt", "data_residency_mismatch", "bio_policy",
    "misalignment_policy_violation", "vector_store_timeout", "invalid_image", "invalid_image_format",
    "invalid_base64_image", "invalid_image_url", "image_too_large", "image_too_small", "image_parse_error",
    "image_content_policy_violation", "invalid_image_mode", "image_file_too_large",
    "unsupported_image_media_type", "empty_image_file", "failed_to_download_image", "image_file_not_found",
})


INCOMPLETE_REASONS = frozenset({"max_output_tokens", "max_messages", "content_filter", "steered", None})
_INCOMPLETE_FROM_FINISH: dict[Any, str] = {"length": "max_output_tokens", "content_filter": "content_filter"}


def repair_response(response: JsonObject) -> JsonObject:
    """Fill what the `openai` Response type requires and Llama Stack leaves out."""
    usage = response.get("usage")
    if isinstance(usage, dict):
        input_details = usage.get("input_tokens_details")
        if not isinstance(input_details, dict):
            input_details = usage["input_tokens_details"] = {}
        input_details.setdefault("cached_tokens", 0)
        input_details.setdefault("cache_write_tokens", 0)
        output_details = usage.get("output_tokens_details")
        if not isinstance(output_details, dict):
            output_details = usage["output_tokens_details"] = {}
        output_details.setdefault("reasoning_tokens", 0)
        for key in ("input_tokens", "output_tokens"):
            usage.setdefault(key, 0)
        usage.setdefault("total_tokens", usage["input_tokens"] + usage["output_tokens"])
    error = response.get("error")
    if isinstance(error, dict) and error.get("code") not in RESPONSE_ERROR_CODES:
        error["code"] = "server_error"
    if isinstance(error, dict) and not isinstance(error.get("message"), str):
        error["message"] = str(error.get("message") or "the upstream failed")
    incomplete = response.get("incomplete_details")
    if isinstance(incomplete, dict) and incomplete.get("reason") not in INCOMPLETE_REASONS:
        # Llama Stack 0.7.3 passes Chat Completions' finish_reason through (`length`).
        incomplete["reason"] = _INCOMPLETE_FROM_FINISH.get(incomplete.get("reason"))
    # An upstream that echoes a request's null as null: the Response type requires what
    # the turn ran with, and null asked for the default.
    if response.get("parallel_tool_calls", True) is None:
        response["parallel_tool_calls"] = True
    if response.get("tool_choice", "auto") is None:
        response["tool_choice"] = "auto"
    repair_items(response.get("output"))
    return response


def failed_response(snapshot: JsonObject | None, message: str, code: str = "server_error") -> JsonObject:
    """A `failed` response object built from the last one the stream showed."""
    response = dict(snapshot or {"id": "resp_unknown", "object": "response", "created_at": 0, "model": "",
                                 "output": [], "parallel_tool_calls": True, "tool_choice": "auto",
                                 "tools": []})
    response["status"] = "failed"
    response["error"] = {"code": code if code in RESPONSE_ERROR_CODES else "server_error", "message": message}
    response.setdefault("output", [])
    return response


def repair_items(items: Any) -> Any:
    """Repair the items of an `output` or `input_items` list in place (see repair_item)."""
    if isinstance(items, list):
        for item in items:
            repair_item(item)
    return items


def repair_item(item: Any) -> Any:
    """An output item as the `openai` types have it: today, an `mcp_call`'s error object."""
    if isinstance(item, dict) and item.get("type") == "mcp_call" and item.get("error") is not None:
        item["error"] = mcp_call_error(item["error"])
    return item


def repair_input_items(body: bytes) -> bytes:
    """`GET /v1/responses/{id}/input_items` with its items repaired. A turn's input items
    replay the earlier turns' output, failed MCP calls included. Bodies without an MCP
    call (nearly all) are returned as they came, unparsed."""
    if b'"mcp_call"' not in body:
        return body
    try:
        listing = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(listing, dict):
        return body
    repair_items(listing.get("data"))
    return orjson.dumps(listing)


def _status_of(error: Any) -> int:
    """The HTTP status an upstream error event names in its `code` (500 if none)."""
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, (int, str)) and str(code).isdigit() and 400 <= int(code) < 600:
        return int(code)
    return 500


class StreamRepairer:
    def __init__(self) -> None:
        self.terminal: Event | None = None
        self._snapshot: bytes | None = None   # what a `response.failed` needs, serialised
        # The upstream's values as it sent them (its JSON: item types and indexes of any type).
        self._items: dict[str, tuple[Any, Any]] = {}        # item id -> (item type, output index)
        self._open: dict[Any, str] = {}                     # item type -> id of its open item
        self._pending_args: dict[Any, list[Event]] = {}     # item id -> argument events before its item
        self._held_list_start: Event | None = None
        self._text_done: set[tuple[Any, Any]] = set()
        # Set when the stream's first event is an error: the upstream refused the request
        # inside a 200 stream (Llama Stack 0.7.3 does, e.g. for an unknown
        # previous_response_id): (the HTTP status its error names, its message).
        self.refusal: tuple[int, str] | None = None

    def feed(self, event: Event) -> list[Event]:
        if self.terminal is not None:
            return []  # nothing is valid after the terminal event
        kind = event.type
        if kind in RESPONSE_EVENTS:
            return self._response_event(event)
        if kind in _ARGUMENT_EVENTS:
            return self._arguments(event)
        if kind == "response.output_item.added":
            return self._item_added(event)
        if kind == "response.output_item.done":
            return self._item_done(event)
        if kind == "response.content_part.done":
            return self._content_part_done(event)
        if kind == "response.output_text.done":
            data = event.data
            self._text_done.add((data.get("item_id"), data.get("content_index", 0)))
            return [event]
        if kind in _MCP_LIST_EVENTS:
            return self._progress(event, "mcp_list_tools")
        if kind in _MCP_CALL_EVENTS:
            return self._progress(event, "mcp_call")
        if not kind or kind == "error":
            return self._error_event(event)
        return [event]

    def close(self) -> list[Event]:
        """The stream ended: make sure it ends with a terminal event."""
        if self.terminal is not None:
            return []
        return self.fail("The upstream stream ended without a terminal event.")

    def fail(self, message: str, code: str = "server_error") -> list[Event]:
        """End the stream with `response.failed` (upstream error, timeout, bad event)."""
        if self.terminal is not None:
            return []
        event = Event.build({"type": "response.failed", "sequence_number": 0,
                             "response": failed_response(orjson.loads(self._snapshot) if self._snapshot else None,
                                                         message, code)})
        self.terminal = event
        return [event]

    def _response_event(self, event: Event) -> list[Event]:
        response = event.data.get("response")
        if not isinstance(response, dict):
            return self.fail("The upstream sent a lifecycle event without a response object.")
        repair_response(response)
        if event.type in TERMINAL_EVENTS:
            self.terminal = event
            return [event]
        self._keep(response)
        return [event]

    def started(self, event: Event) -> None:
        """A `response.created` the gateway made itself (the local engine's): nothing to
        repair, but a `response.failed` built later names its response (an interrupted
        query stream is recorded under its id: http/query.py)."""
        response = event.data.get("response")
        if self.terminal is None and isinstance(response, dict):
            self._keep(response)

    def _keep(self, response: dict[str, Any]) -> None:
        # Only what a `response.failed` needs is kept for the stream's life (memory per
        # open stream is a budget): the fields the Response type requires, and its id,
        # serialised (references into the parsed event would keep its whole tree alive) and
        # copied compact (orjson's own result sits in a ~4 KiB block).
        self._snapshot = bytes(memoryview(orjson.dumps({key: response[key] for key in _SNAPSHOT_KEYS
                                                        if key in response})))

    def _error_event(self, event: Event) -> list[Event]:
        error = event.data.get("error")
        if isinstance(error, dict):
            message = str(error.get("message") or "The upstream reported an error.")
        else:
            message = str(event.data.get("message") or error or "The upstream reported an error.")
        if self._snapshot is None:
            self.refusal = (_status_of(error), message)
        return self.fail(message)

    def _arguments(self, event: Event) -> list[Event]:
        item_id = self._item_id(event)
        known = self._items.get(item_id) if item_id else None
        if known is None:
            if item_id is None:
                return []
            self._pending_args.setdefault(item_id, []).append(event)
            return []
        item_type = known[0]
        if item_type == "mcp_call":
            return [self._as_mcp_arguments(event, item_id, known[1])]
        if item_type == "function_call" and event.type.startswith("response.function_call_arguments"):
            return [event]
        return []  # OpenAI streams no arguments for this item type

    def _item_id(self, event: Event) -> str | None:
        if event.parsed or event.raw is None:
            value = event.data.get("item_id")
            return value if isinstance(value, str) else None
        match = _ITEM_ID.search(event.raw)
        return match.group(1).decode() if match else None

    def _as_mcp_arguments(self, event: Event, item_id: Any, output_index: Any) -> Event:
        data = event.data
        if event.type.endswith(".delta"):
            return Event.build({"type": "response.mcp_call_arguments.delta", "item_id": item_id,
                                "output_index": output_index, "delta": data.get("delta", ""),
                                "sequence_number": 0})
        return Event.build({"type": "response.mcp_call_arguments.done", "item_id": item_id,
                            "output_index": output_index, "arguments": data.get("arguments", ""),
                            "sequence_number": 0})

    def _item_added(self, event: Event) -> list[Event]:
        data = event.data
        item = data.get("item")
        if not isinstance(item, dict):
            return []
        item_id, item_type = item.get("id"), item.get("type")
        index = data.get("output_index", 0)
        if isinstance(item_id, str):
            self._items[item_id] = (item_type, index)
            self._open[item_type] = item_id
        if item_type == "file_search_call":
            item["queries"] = _parse_queries(item.get("queries"))
        repair_item(item)
        out = [event]
        if item_type == "mcp_list_tools" and self._held_list_start is not None:
            held, self._held_list_start = self._held_list_start, None
            out += self._with_item(held, item_id, index)
        pending = self._pending_args.pop(item_id, []) if isinstance(item_id, str) else []
        if item_type == "mcp_call":
            out += [self._as_mcp_arguments(arg, item_id, index) for arg in pending]
        # Arguments of a call the upstream then presented as another item at the same
        # position (an approval request) belong to no item the client will see.
        for other_id in [key for key, events in self._pending_args.items()
                         if events and events[0].data.get("output_index") == index]:
            del self._pending_args[other_id]
        return out

    def _item_done(self, event: Event) -> list[Event]:
        data = event.data
        item = data.get("item")
        if isinstance(item, dict):
            if item.get("type") == "file_search_call":
                item["queries"] = _parse_queries(item.get("queries"))
            repair_item(item)
            item_id = item.get("id")
            self._pending_args.pop(item_id, None)
            if self._open.get(item.get("type")) == item_id:
                del self._open[item["type"]]
        return [event]

    def _content_part_done(self, event: Event) -> list[Event]:
        data = event.data
        part = data.get("part")
        key = (data.get("item_id"), data.get("content_index", 0))
        if not isinstance(part, dict) or part.get("type") != "output_text" or key in self._text_done:
            return [event]
        self._text_done.add(key)
        text_done = Event.build({"type": "response.output_text.done", "item_id": key[0],
                                 "output_index": data.get("output_index", 0), "content_index": key[1],
                                 "text": part.get("text", ""), "logprobs": part.get("logprobs") or [],
                                 "sequence_number": 0})
        return [text_done, event]

    def _progress(self, event: Event, item_type: str) -> list[Event]:
        data = event.data
        if isinstance(data.get("item_id"), str) and isinstance(data.get("output_index"), int):
            return [event]
        if event.type == "response.mcp_list_tools.in_progress" and item_type not in self._open:
            self._held_list_start = event
            return []
        item_id = self._open.get(item_type)
        if item_id is None:
            return []  # nothing to attach it to: dropped, as LCORE drops server-side MCP events
        return self._with_item(event, item_id, self._items[item_id][1])

    @staticmethod
    def _with_item(event: Event, item_id: str | None, index: int) -> list[Event]:
        if item_id is None:
            return []
        data = event.data
        data["item_id"] = item_id
        data["output_index"] = index
        return [event]


def _parse_queries(queries: Any) -> Any:
    """Llama Stack's first file_search item holds the raw JSON arguments as its query."""
    if not isinstance(queries, list):
        return queries
    parsed = []
    for query in queries:
        if isinstance(query, str) and query.startswith("{"):
            try:
                arguments = orjson.loads(query)
            except orjson.JSONDecodeError:
                arguments = None
            if isinstance(arguments, dict):
                value = arguments.get("query", arguments.get("queries"))
                if isinstance(value, str):
                    parsed.append(value)
                    continue
                if isinstance(value, list):
                    parsed.extend(str(v) for v in value)
                    continue
        parsed.append(query)
    return parsed
