"""What a run gives back: the result, and the events a streamed run yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

# How a run ended: a final answer; the server's `incomplete` (length, content filter);
# max_turns model calls without one; waiting for approvals (see Agent.resume).
RunStatus = Literal["completed", "incomplete", "max_turns", "pending_approval"]


@dataclass(slots=True)
class Usage:
    """Tokens summed over every model call of a run (`requests` counts the calls)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0

    def add(self, usage: Any) -> None:
        self.requests += 1
        if isinstance(usage, dict):
            self.input_tokens += _count(usage.get("input_tokens"))
            self.output_tokens += _count(usage.get("output_tokens"))
            self.total_tokens += _count(usage.get("total_tokens"))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """An `mcp_approval_request` item: the server asks whether to call an MCP tool."""

    id: str
    server_label: str
    name: str
    arguments: str

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "ApprovalRequest":
        return cls(str(item.get("id") or ""), str(item.get("server_label") or ""),
                   str(item.get("name") or ""), str(item.get("arguments") or ""))


@dataclass(slots=True)
class RunResult:
    """output_text: the final answer's text ("" when the run stopped without one);
    items: every item of the run, in order (the server's output items and the
    function_call_output / mcp_approval_response items the agent sent), as JSON objects;
    usage: summed over the run's model calls; pending_approvals: what a run without an
    approval callback stopped at; response_id: the last response's id."""

    output_text: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    pending_approvals: list[ApprovalRequest] = field(default_factory=list)
    status: RunStatus = "completed"
    response_id: str | None = None
    conversation: str | None = None


@dataclass(frozen=True, slots=True)
class TextDeltaEvent:
    delta: str
    item_id: str | None = None
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """The model asked for a function call; the agent is about to run it."""

    call_id: str
    name: str
    arguments: str
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultEvent:
    """A function call's output as the model will see it (is_error: the arguments were
    invalid, the tool raised, or no such tool)."""

    call_id: str
    name: str
    output: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class ApprovalRequestEvent:
    """approved: the callback's verdict, or None when the run stops for the caller."""

    request: ApprovalRequest
    approved: bool | None = None
    type: Literal["approval_request"] = "approval_request"


@dataclass(frozen=True, slots=True)
class ResultEvent:
    result: RunResult
    type: Literal["result"] = "result"


Event = Union[TextDeltaEvent, ToolCallEvent, ToolResultEvent, ApprovalRequestEvent, ResultEvent]
