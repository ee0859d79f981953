"""`service.websocket`: the WebSocket transport of `/v1/responses` (OpenResponses
2026-04-24, issue 26). Every number a client could push against is capped here."""

from __future__ import annotations

from pydantic import Field

from gateway.config.base import Strict


class WebSocketConfig(Strict):
    # false: an upgrade of GET /v1/responses is refused (426 is not sent: the route
    # answers as the list it also is).
    enabled: bool = True
    # The spec's 60-minute connection limit: past it the turn in progress completes,
    # then `websocket_connection_limit_reached` and the socket closes.
    max_connection_seconds: float = Field(3600, gt=0, le=24 * 3600)
    # A connection with no turn running or queued for this long is closed.
    idle_timeout_seconds: float = Field(300, gt=0, le=24 * 3600)
    # Open sockets one user may hold on a replica; one more upgrade gets 429.
    max_connections_per_user: int = Field(16, ge=1, le=10000)
    # `response.create` messages that may wait behind the running turn; one more gets
    # an error message (`websocket_queue_full`) and is not run.
    max_queued_messages: int = Field(8, ge=0, le=1000)
    # The bytes those waiting messages may hold together (kept as the text that came,
    # validated on arrival); one that would exceed it gets `websocket_queue_full`. At
    # least `service.max_request_body_bytes`, or a message that large never waits.
    max_queued_bytes: int = Field(16 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    # The context kept in memory for a `store: false` continuation (the latest
    # response's input and output items, as JSON). A response whose context is larger
    # is not held: continuing it fails with `previous_response_not_found`.
    max_context_bytes: int = Field(4 * 1024 * 1024, ge=1024)
