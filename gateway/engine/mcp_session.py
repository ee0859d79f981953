"""One MCP session on the `mcp` package's client, and what its failures mean.

Kept apart from `mcp.py` so that the `mcp` package (and httpx2) are loaded only when a
turn first talks to an MCP server: `mcp.py` imports this module on first use.

A call is one `tools/call`: the `mcp` client validates a result's structured content
against the tool's output schema, and lists the server's tools first when its session
has not seen the tool (each of ours is new). `ListedSession` is told the tool as the
turn's listing gave it instead, so it never lists again.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Mapping
from urllib.parse import urlsplit

import httpx2
from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.engine.mcp_types import McpFailure, McpServer, ReadBudget
from gateway.engine.mcp_connect import guarded_client, refusal_of, tls_context

log = logging.getLogger("gateway.engine.mcp")


def client_factory(server: McpServer, budget: ReadBudget | None = None) -> Callable[..., httpx2.AsyncClient]:
    """The httpx2 client of one session (the `mcp` transports' factory shape): a
    client-supplied server's connects only where its guard allows, and reads each
    response only up to `budget`."""

    def make(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
             auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        if server.guard is not None:
            return guarded_client(server.guard, headers, timeout, auth, budget)
        return httpx2.AsyncClient(headers=headers, timeout=timeout or httpx2.Timeout(server.timeout), auth=auth,
                                  verify=tls_context())

    return make


class ListedSession(ClientSession):
    """A session that knows the tools the turn listed (`listed`: name → the tool's
    `input_schema` and `output_schema`), so a call's result is validated against the
    listed output schema without a `tools/list` first. A tool the turn has no output
    schema for (its listing came from an earlier turn of the conversation, which keeps
    no output schemas, or an approved call, which runs before any listing) is called
    without that validation: the gateway passes the tool's output on as text anyway."""

    def __init__(self, *args: Any, listed: Mapping[str, Mapping[str, Any]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._listed = listed

    def know(self, name: str) -> None:
        """Tell the session the tool as listed: its output schema for validation, and
        on a 2026 connection its `x-mcp-header` arguments (mirrored as headers), as a
        `tools/list` would have. The package's own path for a listing it was served."""
        known = self._listed.get(name)
        if known is None:
            return
        tool = types.Tool(name=name, input_schema=known.get("input_schema") or {"type": "object"},
                          output_schema=known.get("output_schema"))
        self._absorb_tool_listing(types.ListToolsResult(tools=[tool]), complete=False)

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        if (self._listed.get(name) or {}).get("output_schema") is None:
            return  # nothing to validate against, and never a listing to find out
        await super().validate_tool_result(name, result)


@asynccontextmanager
async def session(server: McpServer, budget: ReadBudget | None = None,
                  listed: Mapping[str, Mapping[str, Any]] | None = None) -> AsyncIterator[ClientSession]:
    """An initialized session: streamable HTTP, or SSE for a path ending in `/sse`.
    `listed`: the tools the turn listed, for a session that calls one (`ListedSession`)."""
    make = client_factory(server, budget)

    def opened_session(read: Any, write: Any) -> ClientSession:
        return ClientSession(read, write) if listed is None else ListedSession(read, write, listed=listed)

    if urlsplit(server.url).path.rstrip("/").endswith("/sse"):
        transport = sse_client(server.url, headers=dict(server.headers), timeout=server.timeout,
                               sse_read_timeout=server.timeout, httpx_client_factory=make)
        async with transport as (read, write), opened_session(read, write) as opened:
            await opened.initialize()
            yield opened
        return
    # A budget caps one SSE event too (the package's own 1 MiB default otherwise).
    events: dict[str, Any] = {} if budget is None else {"max_sse_event_size": budget.limit}
    async with make(dict(server.headers), httpx2.Timeout(server.timeout)) as http:
        async with streamable_http_client(server.url, http_client=http, **events) as (read, write), \
                opened_session(read, write) as opened:
            await opened.initialize()
            yield opened


def error_of(server: McpServer, exc: BaseException) -> dict[str, Any]:
    """The `openai` error object for what an MCP operation raised."""
    if isinstance(exc, McpFailure):
        return exc.error
    refused = refusal_of(exc)
    if refused is not None:
        return {"type": "http_error", "code": 0, "message": str(refused)}
    if isinstance(exc, MCPError):
        return {"type": "mcp_protocol_error", "code": exc.code if isinstance(exc.code, int) else 0,
                "message": str(exc.message if hasattr(exc, "message") else exc)}
    if isinstance(exc, httpx2.HTTPStatusError):
        return {"type": "http_error", "code": exc.response.status_code,
                "message": f"MCP server {server.label!r} answered HTTP {exc.response.status_code}"}
    if isinstance(exc, (httpx2.HTTPError, OSError)):
        return {"type": "http_error", "code": 0, "message": f"MCP server {server.label!r} is unreachable"}
    log.warning("MCP server %s failed: %r", server.label, exc)
    return {"type": "http_error", "code": 0, "message": f"MCP server {server.label!r} failed: {type(exc).__name__}"}
