"""One MCP session on the `mcp` package's client, and what its failures mean.

Kept apart from `mcp.py` so that the `mcp` package (and httpx2) are loaded only when a
turn first talks to an MCP server: `mcp.py` imports this module on first use.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlsplit

import httpx2
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.engine.mcp_types import McpFailure, McpServer
from gateway.engine.mcp_connect import guarded_client, refusal_of, tls_context

log = logging.getLogger("gateway.engine.mcp")


def client_factory(server: McpServer) -> Callable[..., httpx2.AsyncClient]:
    """The httpx2 client of one session (the `mcp` transports' factory shape): a
    client-supplied server's connects only where its guard allows."""

    def make(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
             auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        if server.guard is not None:
            return guarded_client(server.guard, headers, timeout, auth)
        return httpx2.AsyncClient(headers=headers, timeout=timeout or httpx2.Timeout(server.timeout), auth=auth,
                                  verify=tls_context())

    return make


@asynccontextmanager
async def session(server: McpServer) -> AsyncIterator[ClientSession]:
    """An initialized session: streamable HTTP, or SSE for a path ending in `/sse`."""
    make = client_factory(server)
    if urlsplit(server.url).path.rstrip("/").endswith("/sse"):
        transport = sse_client(server.url, headers=dict(server.headers), timeout=server.timeout,
                               sse_read_timeout=server.timeout, httpx_client_factory=make)
        async with transport as (read, write), ClientSession(read, write) as opened:
            await opened.initialize()
            yield opened
        return
    async with make(dict(server.headers), httpx2.Timeout(server.timeout)) as http:
        async with streamable_http_client(server.url, http_client=http) as (read, write), \
                ClientSession(read, write) as opened:
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
