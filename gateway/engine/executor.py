"""The tool-executor interface (spec 002): what the loop needs from anything that runs
a tool on the server side. Function tools have no executor: their calls go back to the
client. The next executors (MCP, file_search, web_search) implement this and nothing
in the loop changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


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
