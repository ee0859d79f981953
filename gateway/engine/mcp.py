"""The MCP executor of the local engine, on the `mcp` package's client.

Each operation (list the tools, call one) opens its own session: streamable HTTP, or
the SSE transport for a `server_url` whose path ends in `/sse`. A session lives inside
one task (the `mcp` transports are anyio task groups, which must be left in the task
that entered them), and the loop runs calls as concurrent tasks, so sessions are not
shared between operations. The sessions themselves are in `mcp_session.py`, imported
on first use: a gateway whose turns never reach an MCP server never loads the `mcp`
package (start-up memory, tests/test_startup_imports.py). Every request of a session
carries the server's credentials as `tools.py` resolved them for this request (the
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
from typing import Any, Mapping

import orjson

from gateway.engine.executor import EngineTool, ToolCall, ToolResult
from gateway.engine.mcp_types import McpFailure, McpServer, text_of

MAX_OUTPUT_CHARS = 100_000
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


async def list_tools(server: McpServer) -> list[dict[str, Any]]:
    """The server's tools as an `mcp_list_tools` item lists them. Raises McpFailure."""

    from gateway.engine.mcp_session import session as _session  # the `mcp` package, on first use

    async def run() -> list[dict[str, Any]]:
        async with _session(server) as session:
            listed = await session.list_tools()
        return [{"name": tool.name, "description": tool.description, "input_schema": tool.input_schema,
                 "annotations": None} for tool in listed.tools]

    return await _bounded(server, run())


async def call_tool(server: McpServer, name: str, arguments: dict[str, Any]) -> str:
    """The tool's text output. Raises McpFailure."""

    from gateway.engine.mcp_session import session as _session

    async def run() -> str:
        async with _session(server) as session:
            result = await session.call_tool(name, arguments)
        content = [part.model_dump(mode="json", exclude_none=True) for part in result.content]
        if result.is_error:
            raise McpFailure({"type": "mcp_tool_execution_error", "content": content})
        if not content and result.structured_content is not None:
            return orjson.dumps(result.structured_content).decode()
        return text_of(content)

    return await _bounded(server, run())


async def _bounded(server: McpServer, operation: Any) -> Any:
    """The operation within the server's timeout, its failures as McpFailure."""
    try:
        async with asyncio.timeout(server.timeout):
            return await operation
    except McpFailure:
        raise
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        raise McpFailure({"type": "http_error", "code": 0,
                          "message": f"MCP server {server.label!r} did not answer within {server.timeout:g} s"})
    except BaseException as exc:  # anyio task groups wrap what their transports raised
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
            error = {"type": "mcp_protocol_error", "code": -32602, "message": f"Invalid arguments: {exc}"}
            return ToolResult(error["message"], is_error=True, fields={"error": error})
        try:
            output = await call_tool(server, call.tool["mcp_name"], arguments)
        except McpFailure as failure:
            return ToolResult(error_text(failure.error), is_error=True, fields={"error": failure.error})
        if len(output) > MAX_OUTPUT_CHARS:
            output = output[:MAX_OUTPUT_CHARS] + f"\n[output cut at {MAX_OUTPUT_CHARS} characters]"
        return ToolResult(output, fields={"output": output})
