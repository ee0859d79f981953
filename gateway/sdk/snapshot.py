"""An agent's state as JSON, and back.

A snapshot is plain JSON (never pickle: restoring one runs no code of its author's) in a
versioned format: `{"format": "gateway.sdk.agent", "version": 1, ...}`. Restoring treats
it as untrusted input: pydantic models with `extra="forbid"` check every field's type and
size, items must be JSON objects with a `type`, ids and names have bounded lengths and
plain characters; nesting, self-containing data and non-finite numbers are refused
before `json` or pydantic recurse into them (`SnapshotError`, never Python's
`RecursionError`). What it cannot check is the meaning of the history it carries, which
is sent to the server as any input would be; a pending function call it carries runs
only after its arguments pass the restoring process's own tool schema.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Annotated, Any, Iterator, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, JsonValue,
                      StringConstraints, ValidationError)

from .errors import SnapshotError
from .loop import AgentConfig, AgentState, Chain

FORMAT = "gateway.sdk.agent"
VERSION = 1
MAX_ITEMS = 100_000
MAX_TEXT = 16 * 1024 * 1024
# Arrays and objects a snapshot may nest (the snapshot itself is level 1), as the gateway
# allows a request body: below what `json` and pydantic reach by recursion, so a deeper
# one is refused by this module and never by Python's recursion limit.
MAX_DEPTH = 200
# Values (arrays, objects and scalars) a snapshot given as data may hold as pydantic walks
# it: as many as the largest snapshot text (4 * MAX_TEXT) could.
MAX_VALUES = 2 * MAX_TEXT
_TOO_DEEP = f"the snapshot nests arrays and objects deeper than {MAX_DEPTH} levels"
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}

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
        snapshot = _decode(snapshot)
    elif isinstance(snapshot, dict):
        _check_data(snapshot)   # before anything recurses into it
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
        # A key may be as long as the snapshot: each part of a location is cut short.
        problems = "; ".join(f"{'.'.join(str(p)[:64] for p in e['loc'])}: {e['msg']}"
                             for e in exc.errors(include_url=False)[:10])
        raise SnapshotError(f"invalid snapshot: {problems}") from None


def _decode(text: str | bytes | bytearray) -> Any:
    """JSON text decoded, its nesting bounded before `json` recurses into it."""
    if len(text) > 4 * MAX_TEXT:
        raise SnapshotError("the snapshot is too large")
    if not isinstance(text, str):
        try:
            text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
        except (UnicodeDecodeError, LookupError) as exc:
            raise SnapshotError(f"the snapshot is not JSON: {exc}") from None
    if _text_depth(text) > MAX_DEPTH:
        raise SnapshotError(_TOO_DEEP)
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:  # the caller's own stack was nearly used up: still the SDK's error
        raise SnapshotError(_TOO_DEEP) from None
    except SnapshotError:
        raise
    except ValueError as exc:  # JSONDecodeError, an integer of too many digits
        raise SnapshotError(f"the snapshot is not JSON: {exc}") from None


def _text_depth(text: str) -> int:
    """How deep the arrays and objects of JSON text nest: its strings taken out, the
    brackets left counted (each step at C speed, no Python call per character). Only
    exact for valid JSON, which is all `json` decodes."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_NESTING.__getitem__, brackets)), default=0)


def _check_data(root: dict[str, Any]) -> None:
    """SnapshotError for data pydantic must not be handed: nested past MAX_DEPTH, a
    value that contains itself, a float JSON cannot carry, or more than MAX_VALUES
    values as pydantic walks them (a container reached twice is walked twice: shared
    lists nested 100 deep are 2**100 values). Walked without recursion, each container
    once (state may share an item between lists): its size and height are remembered."""
    known: dict[int, tuple[int, int]] = {}       # id → (values, height) of a container walked
    on_path: set[int] = set()
    # The containers from the root to the one being walked: (it, its children, [values, height]).
    path: list[tuple[Any, Iterator[Any], list[int]]] = []

    def enter(node: Any) -> None:
        if id(node) in on_path:
            raise SnapshotError("the snapshot contains itself: it is not JSON data")
        if len(path) >= MAX_DEPTH:
            raise SnapshotError(_TOO_DEEP)
        on_path.add(id(node))
        path.append((node, iter(node.values() if isinstance(node, dict) else node), [1, 1]))

    enter(root)
    while path:
        node, children, seen = path[-1]
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                done = known.get(id(child))
                if done is None:
                    enter(child)
                    break
                if len(path) + done[1] > MAX_DEPTH:
                    raise SnapshotError(_TOO_DEEP)
                seen[0] += done[0]
                seen[1] = max(seen[1], done[1] + 1)
            else:
                if isinstance(child, float) and not math.isfinite(child):
                    raise SnapshotError(f"the snapshot holds {child!r}, which is not JSON")
                seen[0] += 1
        else:
            path.pop()
            on_path.discard(id(node))
            if seen[0] > MAX_VALUES:
                raise SnapshotError(f"the snapshot holds more than {MAX_VALUES} values")
            known[id(node)] = (seen[0], seen[1])
            if path:
                parent = path[-1][2]
                parent[0] += seen[0]
                parent[1] = max(parent[1], seen[1] + 1)


def _no_constant(name: str) -> Any:
    raise SnapshotError(f"the snapshot holds {name}, which is not JSON")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):  # `1e999`: JSON has no infinity
        raise SnapshotError(f"the snapshot holds {literal[:32]}, which is not a finite number")
    return number


def state_of(checked: SnapshotV1) -> AgentState:
    return AgentState(previous_response_id=checked.previous_response_id,
                      conversation=checked.conversation,
                      history=[dict(item) for item in checked.history],
                      pending_calls=[item.model_dump() for item in checked.pending_calls],
                      pending_approvals=[item.model_dump() for item in checked.pending_approvals])
