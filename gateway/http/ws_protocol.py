"""The WebSocket transport's message protocol and connection-local state, sans I/O
(`http/websocket.py` is the aiohttp side).

A client message is one JSON object: `response.create` (a response-create body plus
`type`, and the `openai` client's optional `stream_id` lane) or `response.steer`
(refused: the gateway does not steer). Anything else is answered with the spec's
error envelope, and the connection stays usable.

`Continuation` is the connection-local state of the spec's "WebSocket Continuation":
the latest response's context (its input and output items), so that a `store: false`
follow-up naming it as `previous_response_id` continues without any store: the
gateway sends the upstream that context followed by the new items. A `store: true`
response is chained by id as on HTTP (the turn store has it), so an older one is
loaded from the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.schema.errors import ApiError
from gateway.schema.json_body import MAX_JSON_ITEMS, too_many_items
from gateway.schema.json_types import JsonObject
from gateway.turns.prepare import Checked

CREATE = "response.create"
STEER = "response.steer"
# HTTP's transport fields: the spec forbids them in a WebSocket `response.create`.
_TRANSPORT_FIELDS = ("stream", "stream_options", "background")
_MAX_STREAM_ID = 128
# What a held turn was chained to beyond its own input (a stored response, a
# conversation): its continuation is chained to the same, so no history is lost.
_CHAIN_FIELDS = ("previous_response_id", "conversation")


@dataclass(frozen=True)
class Create:
    body: dict[str, Any]          # the response-create body (no `type`, no `stream_id`)
    stream_id: str | None
    size: int                     # the message's bytes (UTF-8)


@dataclass(frozen=True)
class Waiting:
    """A validated `response.create` waiting in a connection's queue: the text that came
    (parsed again when its turn runs), so what waits costs its bytes and no more. A
    message that runs as it arrives (nothing queued or running before it) keeps what
    was parsed and checked instead (`ready`), as an HTTP request being prepared does:
    its turn is not parsed and validated twice."""
    data: str | bytes
    stream_id: str | None
    size: int
    ready: tuple[Create, Checked] | None = None

    def create(self) -> Create:
        """The message as parsed when it came, or parsed again when its turn runs."""
        if self.ready is not None:
            return self.ready[0]
        parsed = parse(self.data, self.size)
        assert isinstance(parsed, Create)
        return parsed

    @property
    def checked(self) -> Checked | None:
        """What `TurnService.check` found of it, where it was kept (`ready`)."""
        return self.ready[1] if self.ready is not None else None


@dataclass(frozen=True)
class Steer:
    message: dict[str, Any]


def parse(data: str | bytes, limit: int, max_items: int = MAX_JSON_ITEMS) -> Create | Steer:
    """One client message, or the ApiError that answers it (`limit`: the soft size
    limit, `service.max_request_body_bytes`; `max_items`: `service.max_json_items`, the
    arrays, objects and items a message may hold, counted before it is decoded)."""
    # Its UTF-8 bytes (what a str holds in memory is never more than them).
    size = len(data) if isinstance(data, bytes) or data.isascii() or len(data) > limit else len(data.encode())
    if size > limit:
        raise ApiError(413, "Message too large", f"A WebSocket message may hold at most {limit} bytes.",
                       code="message_too_large")
    if too_many_items(data, max_items):
        raise ApiError(400, "Invalid JSON", f"A message may hold at most {max_items} arrays, objects and items "
                       "in them.", code="invalid_json")
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "Invalid JSON", f"The message is not JSON: {exc}", code="invalid_json") from None
    if not isinstance(message, dict):
        raise ApiError(400, "Invalid message", "A message must be a JSON object with a `type`.",
                       code="invalid_message", param="type")
    kind = message.get("type")
    if kind == STEER:
        return Steer(message)
    if kind != CREATE:
        raise ApiError(400, "Unknown message type", f"Unsupported message type {kind!r}: send `{CREATE}`.",
                       code="unknown_message_type", param="type")
    for name in _TRANSPORT_FIELDS:
        if name in message:
            raise ApiError(400, "Unsupported parameter",
                           f"`{name}` is an HTTP transport field and must not be sent over the WebSocket.",
                           code="unsupported_parameter", param=name)
    stream_id = message.get("stream_id")
    if stream_id is not None and (not isinstance(stream_id, str) or not 0 < len(stream_id) <= _MAX_STREAM_ID):
        raise ApiError(400, "Invalid attribute value", f"`stream_id` must be a string of 1-{_MAX_STREAM_ID} "
                       "characters.", code="invalid_value", param="stream_id")
    body = {key: value for key, value in message.items() if key != "type" and key != "stream_id"}
    # The runner streams every WebSocket turn; the client never chose that.
    body["stream"] = True
    return Create(body, stream_id, size)


def lane_of(data: str | bytes, max_items: int = MAX_JSON_ITEMS) -> str | None:
    """The `stream_id` of a message that could not be parsed as a whole, if readable
    (so its error still goes to its lane)."""
    if too_many_items(data, max_items):
        return None   # decoding it is what its refusal saved
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    stream_id = message.get("stream_id") if isinstance(message, dict) else None
    return stream_id if isinstance(stream_id, str) and len(stream_id) <= _MAX_STREAM_ID else None


def error_message(error: ApiError, stream_id: str | None = None) -> bytes:
    """The spec's envelope; `error.type` always (the `openai` package requires it) and
    LCORE's `detail` inside `error` (the envelope allows more properties)."""
    envelope: dict[str, Any] = {"type": "error", "status": error.status,
                                "error": {"type": error.error_type, "code": error.code,
                                          "message": f"{error.response}: {error.cause}", "param": error.param,
                                          "detail": error.detail}}
    if stream_id is not None:
        envelope["stream_id"] = stream_id
    return orjson.dumps(envelope)


def steer_refused(steer: Steer) -> bytes:
    """`response.steer.failed` with `steering_not_supported`: the input is handed back."""
    message = steer.message
    previous = message.get("previous_response_id")
    return orjson.dumps({
        "type": "response.steer.failed", "sequence_number": 0,
        "error": {"type": "invalid_request_error", "code": "steering_not_supported",
                  "message": "This gateway does not support steering; send the input in a new response.create."},
        "steer": {"input": message.get("input", ""), "previous_response_id": previous if isinstance(previous, str)
                  else ""}})


def previous_not_found(response_id: str, why: str = "") -> ApiError:
    return ApiError(400, "Previous response not found", f"Previous response with id '{response_id}' not found."
                    + (f" {why}" if why else ""), code="previous_response_not_found", param="previous_response_id")


def connection_limit(seconds: float) -> ApiError:
    return ApiError(400, "WebSocket connection limit reached", f"A WebSocket connection lasts at most {seconds:g} "
                    "seconds; open a new connection.", code="websocket_connection_limit_reached")


def queue_full(limit: int) -> ApiError:
    return ApiError(429, "Too many queued messages", f"At most {limit} response.create messages may wait behind the "
                    "running turn on one connection.", code="websocket_queue_full")


def queue_bytes_full(limit: int) -> ApiError:
    return ApiError(429, "Too many queued bytes", f"The response.create messages waiting behind the running turn on "
                    f"one connection may hold at most {limit} bytes together.", code="websocket_queue_full")


def idle_timeout(seconds: float) -> ApiError:
    return ApiError(408, "WebSocket idle timeout", f"No turn for {seconds:g} seconds; the connection is closed.",
                    code="websocket_idle_timeout")


def _check_call_outputs(items: list[Any]) -> None:
    """A held continuation's whole input is known here: a tool output that answers no
    call in it is a 400 (OpenAI's message), so the turn fails and, as the spec says of a
    failed continuation, the id it continued from is evicted."""
    calls = {(item.get("type"), item.get("call_id")) for item in items if isinstance(item, dict)}
    for item in items:
        if not isinstance(item, dict) or item.get("type") not in _OUTPUT_OF:
            continue
        if (_OUTPUT_OF[item["type"]], item.get("call_id")) not in calls:
            raise ApiError(400, "No tool call found", f"No tool call found for function call output with call_id "
                           f"{item.get('call_id')}.", code="invalid_value", param="input")


_OUTPUT_OF = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def _items(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


class Continuation:
    """The latest response of one connection and, when it was `store: false`, its
    context, capped at `max_bytes` of JSON."""

    __slots__ = ("_max_bytes", "latest", "_stored", "_context", "_chain", "_over")

    def __init__(self, max_bytes: int):
        self._max_bytes = max_bytes
        self.latest: str | None = None
        self._stored = False
        self._context: list[Any] | None = None
        self._chain: dict[str, Any] = {}
        self._over = False

    def body(self, create: Create) -> tuple[JsonObject, str | None]:
        """The body to prepare, and the id it continues from the connection's memory
        (None: as on HTTP). A `store: false` request naming the latest held response
        gets its context as input instead of the id."""
        body = create.body
        previous = body.get("previous_response_id")
        if not isinstance(previous, str) or previous != self.latest or self._stored:
            return body, None
        if self._context is None:
            raise previous_not_found(previous, "Its context was over this connection's limit of "
                                     f"{self._max_bytes} bytes; send the full input." if self._over else "")
        expanded = {key: value for key, value in body.items() if key != "previous_response_id"}
        for key, value in self._chain.items():
            expanded.setdefault(key, value)
        expanded["input"] = self._context + _items(body.get("input"))
        _check_call_outputs(expanded["input"])
        return expanded, previous

    def record(self, body: JsonObject, response: JsonObject | None) -> None:
        """A turn ended with `response` (its terminal object): it is the latest."""
        if not response or not isinstance(response.get("id"), str):
            return
        self.latest = response["id"]
        self._stored = body.get("store", True) is not False
        self._context, self._over = None, False
        if self._stored:
            return
        self._chain = {key: body[key] for key in _CHAIN_FIELDS if body.get(key) is not None}
        context = _items(body.get("input")) + [item for item in response.get("output") or ()
                                               if isinstance(item, dict)]
        if len(orjson.dumps(context)) > self._max_bytes:
            self._over = True
            return
        self._context = context

    def evict(self, response_id: str | None) -> None:
        """A continuation from `response_id` failed: the connection forgets it."""
        if response_id is not None and response_id == self.latest:
            self.latest, self._context, self._stored, self._over = None, None, False, False
            self._chain = {}
