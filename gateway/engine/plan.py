"""`Plan`: what the agentic loop (`loop.py`) needs from a translated request. Its own
module because the tools (`file_search.py`, `web_search.py`, `mcp_tools.py`) add to a
plan before the loop runs, and the loop runs them: neither side imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from gateway.schema.json_types import ResponseUsage
from gateway.streaming.events import Event


@dataclass(slots=True)
class Plan:
    """What the loop needs from the translated request."""

    chat: dict[str, Any]                    # the chat request but its messages and tool_choice
    messages: list[dict[str, Any]]
    tools: dict[str, dict[str, Any]]        # the request's tools by name
    tool_choice: Any = None                 # Chat Completions' form; None: not sent
    allowed: frozenset[str] | None = None   # names the model may call (None: any tool)
    max_infer_iters: int = 10
    max_tool_calls: int | None = None
    client_tool_status: str = "completed"
    seen_call_ids: set[str] = field(default_factory=set)
    # Work before the first round, after `response.created` (listing MCP servers' tools
    # into `tools` and `chat`): its events, a list at a time.
    prelude: Callable[[], AsyncIterator[list[Event]]] | None = None
    # Start the response before the first chat request (a background response: its
    # creator is answered at `response.created`, not at the model's first chunk).
    start_at_once: bool = False
    # The turn's accounting (`engine/turn.py`): told each round's running usage, and
    # asked before each round after the first whether it may run.
    round_ended: Callable[[ResponseUsage], None] | None = None
    admit_round: Callable[[int], Awaitable[bool]] | None = None
    # Told when a round's stream was lost before it reported usage (`UpstreamStreamLost`).
    round_lost: Callable[[], None] | None = None
