"""The tool-executor interface (spec 002): what the loop needs from anything that runs
a tool on the server side (`ToolExecutor`), and what the engine needs from a kind of
server-side tool to plug it in (`EngineTool`: the checks of a request, the echo of its
tool, what it offers the model, the output items its calls are shown as). Function
tools have no executor: their calls go back to the client. A new kind of tool
implements `EngineTool` and is added where the engine is wired (`app.py`); nothing in
the loop, the emitter or `LocalEngine` changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.engine.emitter import Emitter
from gateway.engine.items import ItemKind
from gateway.engine.plan import Plan


@dataclass(slots=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str            # JSON text, as the model wrote it
    tool: dict[str, Any]      # the request's tool definition


@dataclass(slots=True)
class ToolResult:
    output: str
    is_error: bool = False
    # The output items that show this call in the response (a `file_search_call`…);
    # empty: a `function_call_output` item is shown, unless the call is an item of its
    # own (an `mcp_call`, see `Emitter.call_items`), which gets `fields` instead.
    items: list[dict[str, Any]] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)  # e.g. the mcp_call's `output` or `error`
    # Files the answer may cite (file id → filename): its citation markers become
    # `file_citation` annotations (file_search).
    citations: dict[str, str] = field(default_factory=dict)


class ToolExecutor(Protocol):
    def can_execute(self, tool: dict[str, Any]) -> bool:
        """Whether this executor runs calls of this tool definition."""

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run the call. An exception is fed back to the model as an error result."""


@dataclass(slots=True, frozen=True)
class Setup:
    """A turn being set up, as the tools see it before the loop runs."""

    body: dict[str, Any]                  # the Responses request
    tools: list[dict[str, Any]]           # its tools
    history: list[dict[str, Any]]         # the conversation's items before this request
    inputs: list[dict[str, Any]]          # this request's input items, with ids
    plan: Plan                            # what the loop will run: functions the model may call…
    emitter: Emitter                      # …and how their calls are shown (`Emitter.call_items`)


class EngineTool:
    """A kind of server-side tool of the local engine, and the executor of its calls."""

    # The output items its calls are shown as (`items.py`).
    item_kinds: tuple[ItemKind, ...] = ()

    def check(self, body: dict[str, Any]) -> None:
        """Refuse (422) a request with a tool of this kind the engine cannot run, before
        the turn creates anything."""

    def echo(self, tool: dict[str, Any]) -> dict[str, Any] | None:
        """The request's tool as the response shows it, if it is of this kind (None: not)."""
        return None

    def offer(self, setup: Setup) -> None:
        """What the request's tools of this kind offer the model: functions in
        `plan.tools` and `plan.chat["tools"]` (or a `plan.prelude` that adds them), their
        calls' items in `emitter.call_items`."""

    def can_execute(self, tool: dict[str, Any]) -> bool:
        raise NotImplementedError

    async def execute(self, call: ToolCall) -> ToolResult:
        raise NotImplementedError

    async def start(self) -> None:
        """Open what it holds connections of its own with (a configured endpoint)."""

    async def close(self) -> None:
        pass
