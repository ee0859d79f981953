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
class McpLimits:
    """What a client's own server may send (`client_tools.max_mcp_*`): a server that
    answers a listing of 20,000 tools in 22 MB would otherwise be read whole, offered to
    the model and stored in the conversation."""

    message_bytes: int = 4 * 1024 * 1024
    tools: int = 128
    tool_schema_bytes: int = 32 * 1024


class ReadBudget:
    """One operation's cap on the bytes of each response read from its server, and
    whether a response went past it (the transports report that as some other error,
    or not at all: `mcp.py` names the cap instead)."""

    __slots__ = ("limit", "exceeded")

    def __init__(self, limit: int):
        self.limit = limit
        self.exceeded = False


@dataclass(slots=True, frozen=True)
class McpServer:
    """Where and how to reach one server, from a request's `mcp` tool."""

    label: str
    url: str
    headers: Mapping[str, str]
    timeout: float
    guard: DestinationPolicy | None = None  # a client-supplied server: where it may connect
    limits: McpLimits | None = None         # a client-supplied server: what it may send

    @classmethod
    def of(cls, tool: Mapping[str, Any], timeouts: Mapping[str, float | None],
           client_policy: DestinationPolicy | None = None, limits: McpLimits | None = None) -> "McpServer":
        """`timeouts` has every configured server's label; any other server is the
        client's, reached only through `client_policy` (the strictest by default) and
        read within `limits` (the defaults when None)."""
        headers = {str(k): str(v) for k, v in (tool.get("headers") or {}).items()}
        if tool.get("authorization"):
            headers["Authorization"] = f"Bearer {tool['authorization']}"
        label = str(tool.get("server_label"))
        timeout = timeouts.get(label) or DEFAULT_TIMEOUT
        if label in timeouts:
            return cls(label, str(tool.get("server_url")), headers, timeout)
        return cls(label, str(tool.get("server_url")), headers, timeout, client_policy or DestinationPolicy(),
                   limits or McpLimits())


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)
