"""An agent's tools: Python functions it runs itself, and server-side tool descriptions
it hands to the server (`file_search`, `mcp`, `web_search`).

Everything about a tool is checked when the agent is built, so a bad definition is a
`ToolDefinitionError` naming the tool, never a surprise in the middle of a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import Any, Callable, Iterable, Mapping, overload

from pydantic import BaseModel
from pydantic_core import to_json

from .errors import ToolDefinitionError
from .schema import FunctionSchema, derive

# The server-side tool types of the Responses API the gateway understands (spec 001,
# Llama Stack's names and OpenAI's dated web_search variants).
SERVER_TOOL_TYPES = frozenset({"file_search", "mcp", "web_search", "web_search_preview",
                               "web_search_preview_2025_03_11", "web_search_2025_08_26"})


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionTool:
    """A Python function offered to the model; made by `tool()` or from a plain function."""

    fn: Callable[..., Any]
    schema: FunctionSchema

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn) or inspect.iscoroutinefunction(
            getattr(self.fn, "__call__", None))

    def definition(self) -> dict[str, Any]:
        """The `tools` entry of a Responses request."""
        entry: dict[str, Any] = {"type": "function", "name": self.schema.name,
                                 "parameters": self.schema.parameters, "strict": self.schema.strict}
        if self.schema.description:
            entry["description"] = self.schema.description
        return entry

    def call_sync(self, values: BaseModel) -> Any:
        args, kwargs = self.schema.arguments.call_args(values)
        if self.is_async:  # a coroutine function in a sync run: its own event loop
            return asyncio.run(self.fn(*args, **kwargs))
        return self.fn(*args, **kwargs)

    async def call_async(self, values: BaseModel) -> Any:
        args, kwargs = self.schema.arguments.call_args(values)
        if self.is_async:
            return await self.fn(*args, **kwargs)
        # A blocking function must not stall the other calls of the turn.
        return await asyncio.to_thread(self.fn, *args, **kwargs)


@overload
def tool(fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
         strict: bool | None = None) -> FunctionTool: ...


@overload
def tool(fn: None = None, *, name: str | None = None, description: str | None = None,
         strict: bool | None = None) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, strict: bool | None = None) -> Any:
    """A function as a tool, with a name, description or strictness of your choosing;
    usable as `tool(fn, ...)` or as a decorator `@tool(...)`. strict: True requires the
    strict schema, False never sends one, None (what a plain function gets) sends it when
    the parameters allow."""
    def make(target: Callable[..., Any]) -> FunctionTool:
        if not callable(target):
            raise ToolDefinitionError(f"a tool must be a function, not {type(target).__name__}")
        return FunctionTool(target, derive(target, name=name, description=description, strict=strict))

    return make if fn is None else make(fn)


def output_text(result: Any) -> str:
    """What a function returned, as the text of a `function_call_output`."""
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    try:
        return to_json(result).decode()
    except Exception:  # an object pydantic cannot serialise: its str() is the best text
        return str(result)


@dataclasses.dataclass(frozen=True, slots=True)
class Toolset:
    functions: dict[str, FunctionTool]
    server: tuple[dict[str, Any], ...]

    def definitions(self) -> list[dict[str, Any]]:
        return [*(t.definition() for t in self.functions.values()), *(dict(t) for t in self.server)]


def build_toolset(tools: Iterable[Any]) -> Toolset:
    """Functions, FunctionTools and server tool descriptions, checked; names unique."""
    if isinstance(tools, (str, bytes, Mapping)) or callable(tools):
        raise ToolDefinitionError("tools must be a list (or tuple) of tools")
    functions: dict[str, FunctionTool] = {}
    server: list[dict[str, Any]] = []
    names: set[str] = set()
    for index, entry in enumerate(tools):
        if isinstance(entry, Mapping):
            description = _server_tool(entry, index)
            label = description.get("server_label")
            if label is not None:
                key = f"mcp:{label}"
                if key in names:
                    raise ToolDefinitionError(f"tools[{index}]: two mcp tools with server_label {label!r}")
                names.add(key)
            server.append(description)
            continue
        made = entry if isinstance(entry, FunctionTool) else tool(entry)
        if made.name in functions:
            raise ToolDefinitionError(f"tools[{index}]: two tools named {made.name!r}; "
                                      "give one another name with tool(fn, name=...)")
        functions[made.name] = made
    return Toolset(functions, tuple(server))


def _server_tool(entry: Mapping[str, Any], index: int) -> dict[str, Any]:
    kind = entry.get("type")
    if kind == "function":
        raise ToolDefinitionError(f"tools[{index}]: a function tool is a Python function here, "
                                  "not a description the agent could not run")
    if kind not in SERVER_TOOL_TYPES:
        raise ToolDefinitionError(f"tools[{index}]: unknown server-side tool type {kind!r} "
                                  f"(known: {', '.join(sorted(SERVER_TOOL_TYPES))})")
    if kind == "mcp" and not isinstance(entry.get("server_label"), str):
        raise ToolDefinitionError(f"tools[{index}]: an mcp tool needs a server_label")
    if kind == "file_search" and not isinstance(entry.get("vector_store_ids", []), list):
        raise ToolDefinitionError(f"tools[{index}]: file_search's vector_store_ids must be a list")
    try:  # sent as JSON on every request: fail now, not at the first send
        to_json(dict(entry))
    except Exception as exc:
        raise ToolDefinitionError(f"tools[{index}]: not JSON-serialisable: {exc}") from None
    return dict(entry)
