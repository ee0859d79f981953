"""An agent's state as JSON, and back.

A snapshot is plain JSON (never pickle: restoring one runs no code of its author's) in a
versioned format: `{"format": "gateway.sdk.agent", "version": 1, ...}`. Restoring treats
it as untrusted input: pydantic models with `extra="forbid"` check every field's type and
size, items must be JSON objects with a `type`, ids and names have bounded lengths and
plain characters. What it cannot check is the meaning of the history it carries, which
is sent to the server as any input would be; a pending function call it carries runs
only after its arguments pass the restoring process's own tool schema.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, JsonValue,
                      StringConstraints, ValidationError)

from .errors import SnapshotError
from .loop import AgentConfig, AgentState, Chain

FORMAT = "gateway.sdk.agent"
VERSION = 1
MAX_ITEMS = 100_000
MAX_TEXT = 16 * 1024 * 1024

Id = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=r"^[A-Za-z0-9_.:\-]+$")]
Name = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_.\-]+$")]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]


def _typed_item(item: dict[str, JsonValue]) -> dict[str, JsonValue]:
    if not isinstance(item.get("type"), str):
        raise ValueError("an item needs a string `type`")
    return item


Item = Annotated[dict[str, JsonValue], AfterValidator(_typed_item)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FunctionCallItem(_Strict):
    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, JsonValue]  # the server's other fields ride along
    type: Literal["function_call"]
    call_id: Id
    name: Name
    arguments: Text


class ApprovalRequestItem(_Strict):
    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, JsonValue]
    type: Literal["mcp_approval_request"]
    id: Id
    name: Name
    server_label: Text
    arguments: Text


class SnapshotV1(_Strict):
    format: Literal["gateway.sdk.agent"]
    version: Literal[1]
    model: Annotated[str, StringConstraints(max_length=512)] | None
    instructions: Text | None
    max_turns: Annotated[int, Field(ge=1, le=10_000)]
    store: bool
    chain: Chain
    merge_server_tools: bool
    previous_response_id: Id | None
    conversation: Id | None
    history: Annotated[list[Item], Field(max_length=MAX_ITEMS)]
    pending_calls: Annotated[list[FunctionCallItem], Field(max_length=1024)]
    pending_approvals: Annotated[list[ApprovalRequestItem], Field(max_length=1024)]
    # The function tools the agent had (their code is not in a snapshot).
    tools: Annotated[list[Name], Field(max_length=4096)]


def dump(config: AgentConfig, state: AgentState, tool_names: list[str]) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "model": config.model,
            "instructions": config.instructions, "max_turns": config.max_turns,
            "store": config.store, "chain": config.chain,
            "merge_server_tools": config.merge_server_tools,
            "previous_response_id": state.previous_response_id,
            "conversation": state.conversation, "history": list(state.history),
            "pending_calls": list(state.pending_calls),
            "pending_approvals": list(state.pending_approvals), "tools": tool_names}


def load(snapshot: Any) -> SnapshotV1:
    """A snapshot (a dict, or its JSON text) checked; SnapshotError saying what is wrong."""
    if isinstance(snapshot, (str, bytes, bytearray)):
        if len(snapshot) > 4 * MAX_TEXT:
            raise SnapshotError("the snapshot is too large")
        try:
            snapshot = json.loads(snapshot)
        except ValueError as exc:
            raise SnapshotError(f"the snapshot is not JSON: {exc}") from None
    if not isinstance(snapshot, dict):
        raise SnapshotError("a snapshot is a JSON object")
    if snapshot.get("format") != FORMAT:
        raise SnapshotError(f"not an agent snapshot (format {snapshot.get('format')!r}, expected {FORMAT!r})")
    if snapshot.get("version") != VERSION:
        raise SnapshotError(f"unsupported snapshot version {snapshot.get('version')!r}; "
                            f"this SDK reads version {VERSION}")
    try:
        return SnapshotV1.model_validate(snapshot)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors(include_url=False)[:10])
        raise SnapshotError(f"invalid snapshot: {problems}") from None


def state_of(checked: SnapshotV1) -> AgentState:
    return AgentState(previous_response_id=checked.previous_response_id,
                      conversation=checked.conversation,
                      history=[dict(item) for item in checked.history],
                      pending_calls=[item.model_dump() for item in checked.pending_calls],
                      pending_approvals=[item.model_dump() for item in checked.pending_approvals])
