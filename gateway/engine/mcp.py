"""The MCP executor of the local engine, on the `mcp` package's client.

Each operation (list the tools, call one) opens its own session: streamable HTTP, or
the SSE transport for a `server_url` whose path ends in `/sse`. A session lives inside
one task (the `mcp` transports are anyio task groups, which must be left in the task
that entered them), and the loop runs calls as concurrent tasks, so sessions are not
shared between operations. The sessions themselves are in `mcp_session.py`, imported
on first use: a gateway whose turns never reach an MCP server never loads the `mcp`
package (start-up memory, tests/test_startup_imports.py). Every request of a session
carries the server's credentials as `turns/tools.py` resolved them for this request (the
tool's `authorization` as a bearer, its `headers`). A client-supplied server (a `server_label` the operator
did not configure) is reached through `mcp_connect.guarded_client`, which connects only
to addresses `client_tools` allows (a refused one is an `http_error` saying why).

Timeouts: the whole operation (connect, initialize, list or call) is bounded by the
configured server's `timeout` (`mcp_types.DEFAULT_TIMEOUT` otherwise), so an unreachable
or hung server is an error result, never a hung turn. Outputs are cut at `MAX_OUTPUT_CHARS`.

Errors come back as the `openai` package's `McpToolCallError` objects:
`mcp_tool_execution_error` (the tool answered `isError`), `mcp_protocol_error` (a
JSON-RPC error), `http_error` (the server could not be reached or refused; `code` is
the HTTP status, 0 when there was none).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Mapping, TypeVar

import orjson

from gateway.engine.executor import EngineTool, ToolCall, ToolResult
from gateway.engine.mcp_types import McpFailure, McpServer, ReadBudget, text_of

MAX_OUTPUT_CHARS = 100_000
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(slots=True)
class Listing:
    """A server's tools as an `mcp_list_tools` item lists them (`tools`), and what the
    item has no field for: each tool's output schema, which its calls validate against."""

    tools: list[dict[str, Any]]
    output_schemas: dict[str, dict[str, Any] | None]


async def list_tools(server: McpServer) -> Listing:
    """The server's tools, within its limits (a client's server). Raises McpFailure."""

    from gateway.engine.mcp_session import session as _session  # the `mcp` package, on first use

    budget = _budget(server)

    async def run() -> Listing:
        async with _session(server, budget) as session:
            listed = await session.list_tools()
        tools = [{"name": tool.name, "description": tool.description, "input_schema": tool.input_schema,
                  "annotations": None} for tool in listed.tools]
        schemas = {tool.name: tool.output_schema for tool in listed.tools}
        if server.limits is not None:
            _check_listing(server, tools, schemas)
        return Listing(tools, schemas)

    return await _bounded(server, run(), budget)


def _check_listing(server: McpServer, tools: list[dict[str, Any]],
                   schemas: Mapping[str, dict[str, Any] | None]) -> None:
    """A client's server lists at most `limits.tools` tools, each defined in at most
    `limits.tool_schema_bytes` of JSON; otherwise the listing fails as a whole."""
    assert server.limits is not None
    if len(tools) > server.limits.tools:
        raise McpFailure({"type": "http_error", "code": 0,
                          "message": f"MCP server {server.label!r} lists {len(tools)} tools; this gateway takes "
                                     f"at most {server.limits.tools} from a client's MCP server"})
    for tool in tools:
        size = len(orjson.dumps({**tool, "output_schema": schemas.get(tool["name"])}))
        if size > server.limits.tool_schema_bytes:
            raise McpFailure({"type": "http_error", "code": 0,
                              "message": f"MCP server {server.label!r} defines tool {tool['name'][:64]!r} in "
                                         f"{size} bytes; this gateway takes at most "
                                         f"{server.limits.tool_schema_bytes} per tool from a client's MCP server"})


async def call_tool(server: McpServer, name: str, arguments: dict[str, Any],
                    listed: Mapping[str, Any] | None = None) -> str:
    """The tool's text output. `listed`: the tool as the turn listed it (its input and
    output schemas): the call is then one `tools/call`, no listing first. Raises McpFailure."""

    from gateway.engine.mcp_session import ListedSession, session as _session

    budget = _budget(server)

    async def run() -> str:
        async with _session(server, budget, {name: listed or {}}) as session:
            assert isinstance(session, ListedSession)   # given `listed`
            session.know(name)
            result = await session.call_tool(name, arguments)
        content = [part.model_dump(mode="json", exclude_none=True) for part in result.content]
        if result.is_error:
            raise McpFailure({"type": "mcp_tool_execution_error", "content": content})
        if not content and result.structured_content is not None:
            return orjson.dumps(result.structured_content).decode()
        return text_of(content)

    return await _bounded(server, run(), budget)


def _budget(server: McpServer) -> ReadBudget | None:
    return None if server.limits is None else ReadBudget(server.limits.message_bytes)


_Result = TypeVar("_Result")


async def _bounded(server: McpServer, operation: Awaitable[_Result], budget: ReadBudget | None = None) -> _Result:
    """The operation within the server's timeout, its failures as McpFailure (a
    response past the budget, however the transport reported it, says so)."""
    try:
        async with asyncio.timeout(server.timeout):
            return await operation
    except McpFailure:
        raise
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # anyio task groups wrap what their transports raised
        if budget is not None and budget.exceeded:
            raise McpFailure({"type": "http_error", "code": 0,
                              "message": f"MCP server {server.label!r} sent a response longer than {budget.limit} "
                                         "bytes, more than this gateway reads from a client's MCP server"}) from None
        if isinstance(exc, TimeoutError):
            raise McpFailure({"type": "http_error", "code": 0, "message":
                              f"MCP server {server.label!r} did not answer within {server.timeout:g} s"}) from None
        from gateway.engine.mcp_session import error_of

        raise McpFailure(error_of(server, _leaf(exc))) from None


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def error_text(error: Mapping[str, Any]) -> str:
    """What the model reads for a failed call."""
    return str(error.get("message") or text_of(error.get("content")) or error.get("type"))


def model_name(label: str, name: str, taken: set[str]) -> str:
    """The name the model sees for an MCP tool: its own, or `<server_label>__<name>`
    when another tool of the request already has it (cut to Chat Completions' 64)."""
    if name not in taken:
        return name
    base = _NAME_CHARS.sub("_", f"{label}__{name}")[:64]
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[:64 - len(suffix)] + suffix, n + 1
    return candidate


class McpExecutor(EngineTool):
    """Runs the calls of tools the engine listed from MCP servers (`ToolCall.tool` is
    the definition `mcp_tools.py` made: the server and the tool's own name).
    `mcp_tools.McpTools` is the one the engine plugs in: it lists them too."""

    def can_execute(self, tool: dict[str, Any]) -> bool:
        return tool.get("type") == "mcp_tool"

    async def execute(self, call: ToolCall) -> ToolResult:
        server: McpServer = call.tool["server"]
        try:
            arguments = orjson.loads(call.arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("the arguments are not a JSON object")
        except (orjson.JSONDecodeError, ValueError) as exc:
            message = f"Invalid arguments: {exc}"
            error = {"type": "mcp_protocol_error", "code": -32602, "message": message}
            return ToolResult(message, is_error=True, fields={"error": error})
        try:
            output = await call_tool(server, call.tool["mcp_name"], arguments, call.tool.get("listed"))
        except McpFailure as failure:
            error = cut_error(failure.error)
            return ToolResult(error_text(error), is_error=True, fields={"error": error})
        output = cut(output)
        return ToolResult(output, fields={"output": output})


def cut(text: str) -> str:
    """A tool's output (or error) as the item and the model get it: at most
    `MAX_OUTPUT_CHARS`, then a note saying it was cut."""
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return text[:MAX_OUTPUT_CHARS] + f"\n[output cut at {MAX_OUTPUT_CHARS} characters]"


def cut_error(error: dict[str, Any]) -> dict[str, Any]:
    """An error object cut like an output: its `message`, or its `content`'s text parts
    (an `isError` result, as long as the tool likes) within `MAX_OUTPUT_CHARS` together."""
    cut_at = MAX_OUTPUT_CHARS
    if isinstance(error.get("message"), str) and len(error["message"]) > cut_at:
        error = {**error, "message": cut(error["message"])}
    content = error.get("content")
    if not isinstance(content, list) or len(text_of(content)) <= cut_at:
        return error
    parts, left = [], cut_at
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text":
            continue  # an image or a resource in an error: the model reads only text
        text = str(part.get("text") or "")
        if len(text) >= left:
            parts.append({**part, "text": text[:left] + f"\n[output cut at {cut_at} characters]"})
            break
        parts.append(part)
        left -= len(text)
    return {**error, "content": parts}
