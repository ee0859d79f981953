"""Per-app state shared by the handlers: options, stores, the request recorder."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .recording import Recorder
from .store import ConversationStore, ResponseStore

MAX_MCP_DEFINITIONS = 1000


@dataclass(slots=True)
class ServerState:
    responses_enabled: bool = True
    conversations_enabled: bool = True
    delay_ms: float = 0.0
    dialect: str = "llama-stack"   # how /v1/responses streams are framed (stream.py)
    chat_deltas: int | None = None  # text pieces of every chat completion (None: a word each)
    provider_ids: bool = False   # /v1/models as Llama Stack names them: `scripted/<model>`
    # Llama Stack 0.7.3's conversation items (`--llama-stack-items`, conversations.py).
    llama_stack_items: bool = False
    recorder: Recorder = field(default_factory=Recorder)
    responses: ResponseStore = field(default_factory=ResponseStore)
    conversations: ConversationStore = field(default_factory=ConversationStore)
    # MCP tool definitions as received (server_url, headers, authorization...), because
    # the gateway's tests need to see what it injected; the MCP servers are simulated.
    mcp_definitions: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=MAX_MCP_DEFINITIONS))
    # In-flight requests (and, among them, started SSE streams), so a test can prove
    # that the gateway closed its upstream request when its own client went away.
    open_requests: int = 0
    open_streams: int = 0


STATE: web.AppKey[ServerState] = web.AppKey("scripted_state", ServerState)
# Set on a request once its SSE body has started.
STREAMING: web.RequestKey[bool] = web.RequestKey("scripted_streaming", bool)
