"""The `service` section: where and how the gateway listens (LCORE's keys, and ours,
each marked "Ours")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.config.base import Strict, not_built
from gateway.config.websocket import WebSocketConfig


class CorsConfig(Strict):
    allow_origins: list[str] = ["*"]
    allow_credentials: bool = False
    allow_methods: list[str] = ["*"]
    allow_headers: list[str] = ["*"]


class ServiceConfig(Strict):
    host: str = "localhost"
    port: int = Field(8080, ge=1, le=65535)
    base_url: str | None = not_built()   # LCORE's; nothing here reads it
    auth_enabled: bool = False
    # LCORE's: serving processes on the one port (gateway/http/supervisor.py); 1: the
    # process serves itself, no supervisor.
    workers: int = Field(1, ge=1, le=256)
    color_log: bool = True
    access_log: bool = True
    # Ours: the access line's format (docs/tracing-and-logs.md): `text` (colored by
    # `color_log` on a terminal) or `json` (one object a line, for log shippers).
    access_log_format: Literal["text", "json"] = "text"
    # Ours (issue 39): how the audit lines (a refused request, a quota change) and the
    # other log lines naming a user name them: `hashed`, the access line's keyed hash
    # (as many hex digits as the access line shows), or the `raw` id.
    audit_user_ids: Literal["hashed", "raw"] = "hashed"
    root_path: str = ""
    cors: CorsConfig = CorsConfig()
    tls_config: dict[str, Any] | None = not_built()
    # Ours: requests with a larger body get 413 before anything is parsed.
    max_request_body_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    # Ours (issue 39): the most items these lists of a request may hold, checked on the
    # decoded JSON before anything validates them one by one (a 422 naming the field and
    # the cap): validation costs per item, an input item a union refuses 27 errors, so an
    # uncapped list let a small body hold the event loop for seconds. `input` of
    # /v1/responses (and its WebSocket, /v1/responses/compact), its `tools` and
    # `include`, and /v1/query's and /v1/streaming_query's `attachments`.
    max_input_items: int = Field(1000, ge=1, le=100000)
    max_tools: int = Field(128, ge=1, le=10000)
    max_include_entries: int = Field(32, ge=1, le=1000)
    max_attachments: int = Field(100, ge=1, le=10000)
    # Ours (issue 39): the arrays, objects and items in them (counted as the commas
    # between items) a JSON body may hold, counted before it is decoded; more is a 422
    # (`json_invalid`). Decoding builds an object per item: 10 MB of `{},` would be
    # 3.3 million dicts, 300 MB.
    max_json_items: int = Field(200_000, ge=1000, le=10_000_000)
    # Ours: a request header (name and value) larger than this gets 431. Real JWTs with
    # many group claims pass aiohttp's 8 KiB default.
    max_header_bytes: int = Field(32 * 1024, ge=1024)
    # Ours: a request's header section must arrive within this many seconds of its first
    # byte, or the connection gets 408 and is closed (gateway/http/server.py).
    header_timeout_seconds: float = Field(10, gt=0, le=300)
    # Ours: error bodies on the endpoints OpenAI SDKs call carry OpenAI's `error` object
    # beside LCORE's `detail` (`both`), or are exactly LCORE's (`lcore`).
    error_body: Literal["both", "lcore"] = "both"
    # Ours (issues 23, 46): how a response shows its `conversation` when the client named
    # none (a conversation the gateway created, or continued by `previous_response_id`):
    # the id as a string (spec 001) or OpenAI's object `{"id": ...}` (what the `openai`
    # package types it as). `auto`: the object for a request from an OpenAI SDK (it
    # announces itself with `X-Stainless-Lang`, or a `User-Agent` of `OpenAI/...`), the
    # string for every other client (LCORE's send neither). A client that sends
    # `conversation` gets the form it sent (`conv_…`, LCORE's bare id or the object), and
    # so do the turns that continue or fork from its turns by `previous_response_id`.
    conversation_form: Literal["auto", "string", "object"] = "auto"
    # Ours (issue 23): the items one conversation the gateway keeps may hold, added
    # through OpenAI's Conversations API (each is sent as input on the next turn); more
    # is a 400. Conversations the upstream keeps are the upstream's to limit.
    max_conversation_items: int = Field(1000, ge=1, le=100000)
    # Ours: `GET /metrics` and the recording behind it (docs/operating.md); false: neither.
    metrics: bool = True
    # Ours: the responses (streams, JSON and background runs) one user may have running
    # on a replica at once; one more gets 429 before anything is reserved or created.
    max_responses_in_progress_per_user: int = Field(64, ge=1)
    # Ours (issue 26): the WebSocket transport of /v1/responses (docs/websocket.md).
    websocket: WebSocketConfig = WebSocketConfig()
    # Ours (issue 42): on SIGTERM, how long running requests (streams, WebSocket turns,
    # background runs) may go on after readiness turned 503 and the listener closed;
    # what still runs then ends as failed (docs/resilience.md).
    shutdown_grace_seconds: float = Field(20, ge=0, le=3600)
    # Ours (issue 42): a streaming client that leaves more than
    # `max_client_write_buffer_bytes` unread in the gateway's buffer for its connection
    # for `client_drain_timeout_seconds` is cut (its turn abandoned, charged as when a
    # client leaves); the end of a stream waits as long for it (docs/resilience.md).
    max_client_write_buffer_bytes: int = Field(1024 * 1024, ge=64 * 1024)
    client_drain_timeout_seconds: float = Field(30, gt=0, le=3600)

    @field_validator("root_path")
    @classmethod
    def _root_path_shape(cls, value: str) -> str:
        if value and (not value.startswith("/") or value.endswith("/")):
            raise ValueError("must start with '/' and must not end with '/'")
        return value
