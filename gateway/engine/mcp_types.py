"""What the MCP parts of the engine share: where a server is (`McpServer`), how an
operation failed (`McpFailure`), the output items MCP tools are shown as. Its own
module so that `mcp.py` (the operations) and `mcp_session.py` (the `mcp` package's
session, imported on first use) both import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from gateway.destinations import DestinationPolicy
from gateway.engine.items import ItemKind, Lifecycle

DEFAULT_TIMEOUT = 30.0
MCP_CALL = ItemKind("mcp_call", "mcp", Lifecycle.ARGUMENTS)
MCP_APPROVAL_REQUEST = ItemKind("mcp_approval_request", "mcpr", Lifecycle.APPROVAL)
MCP_LIST_TOOLS = ItemKind("mcp_list_tools", "mcpl", Lifecycle.LISTING)


class McpFailure(Exception):
    """An MCP operation failed; `error` is the `openai` error object for the item."""

    def __init__(self, error: dict[str, Any]):
        super().__init__(error.get("message") or text_of(error.get("content")))
        self.error = error


@dataclass(slots=True, frozen=True)
class McpServer:
    """Where and how to reach one server, from a request's `mcp` tool."""

    label: str
    url: str
    headers: Mapping[str, str]
    timeout: float
    guard: DestinationPolicy | None = None  # a client-supplied server: where it may connect

    @classmethod
    def of(cls, tool: Mapping[str, Any], timeouts: Mapping[str, float | None],
           client_policy: DestinationPolicy | None = None) -> "McpServer":
        """`timeouts` has every configured server's label; any other server is the
        client's, and reached only through `client_policy` (the strictest by default)."""
        headers = {str(k): str(v) for k, v in (tool.get("headers") or {}).items()}
        if tool.get("authorization"):
            headers["Authorization"] = f"Bearer {tool['authorization']}"
        label = str(tool.get("server_label"))
        guard = None if label in timeouts else client_policy or DestinationPolicy()
        return cls(label, str(tool.get("server_url")), headers, timeouts.get(label) or DEFAULT_TIMEOUT, guard)


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)
