"""LCORE's `GET /v1/tools` and `GET /v1/mcp-auth/client-options`: what a caller's turns
could use, listed.

`/v1/tools` is the built-in file-search catalogue (the two tools Llama Stack's
`inline::file-search` runtime lists, which LCORE's info.feature expects when no MCP
server is configured), then each configured MCP server's tools, listed from the server
itself with the headers this request resolves for it (the engine's MCP client,
`engine/mcp.py`). Like LCORE, which asks Llama Stack for its providers before listing
the built-in tools, the upstream is asked (`GET /v1/providers`): an unreachable one is
LCORE's 503, whatever the MCP servers would say; any answer lists the built-in tools. A server skipped because a header could not be resolved, or that
could not be listed, is named in `unavailable_servers` (ours, only when there is one)
instead of being only logged. LCORE's OAuth probe runs first (`ConfiguredTools.probe_oauth`).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from typing import Any, Mapping, TypedDict

from gateway.config import McpServerConfig
from gateway.engine.mcp import list_tools
from gateway.engine.mcp_types import DEFAULT_TIMEOUT, McpFailure, McpServer
from gateway.identity import Identity
from gateway.turns.tools import ConfiguredTools, on_the_wire
from gateway.upstream.client import UpstreamClient

log = logging.getLogger("gateway.turns.tool_catalog")



class ToolParameter(TypedDict):
    """One parameter of a listed tool, in LCORE's flat form."""
    name: str
    description: str
    parameter_type: Any     # the JSON Schema's `type` as the server wrote it
    required: bool
    default: Any


class CatalogTool(TypedDict):
    """One tool of `GET /v1/tools` (LCORE's `ToolsResponse` entry)."""
    identifier: str
    description: str
    parameters: list[ToolParameter]
    provider_id: str
    toolgroup_id: str
    server_source: str
    type: str


class UnavailableServer(TypedDict):
    name: str
    reason: str


class ToolList(TypedDict, total=False):
    """`GET /v1/tools`'s body; `unavailable_servers` only when one could not be listed."""
    tools: list[CatalogTool]
    unavailable_servers: list[UnavailableServer]


class ClientAuthServer(TypedDict):
    name: str
    client_auth_headers: list[str]


class ClientOptions(TypedDict):
    """`GET /v1/mcp-auth/client-options`'s body."""
    servers: list[ClientAuthServer]


FILE_SEARCH_PROVIDER = "file-search"
# What LCORE asks Llama Stack before listing the built-in tools; a short wait: it only
# says whether the upstream is there.
PROVIDERS_PATH = "/v1/providers"
_PROVIDERS_TIMEOUT = 10
FILE_SEARCH_TOOLGROUP = "builtin::file_search"
BUILTIN_SOURCE = "builtin"
# LCORE's descriptions of the file-search runtime's tools (Llama Stack's tool definitions).
_BUILTIN: tuple[tuple[str, str, list[ToolParameter]], ...] = (
    ("insert_into_memory", "Insert documents into memory", []),
    ("file_search", "Search for information in a database.",
     [{"name": "query", "description": "The query to search for. Can be a natural language sentence or keywords.",
       "parameter_type": "string", "required": True, "default": None}]),
)
# Tool descriptions in LCORE's structured-metadata form are cut to their plain part.
_METADATA_PREFIXES = ("TOOL_NAME=", "DISPLAY_NAME=", "USECASE=", "INSTRUCTIONS=", "INPUT_DESCRIPTION=",
                      "OUTPUT_DESCRIPTION=", "EXAMPLES=", "PREREQUISITES=", "AGENT_DECISION_CRITERIA=")


def builtin_tools() -> list[CatalogTool]:
    return [catalog_tool(name, description, parameters, FILE_SEARCH_PROVIDER, FILE_SEARCH_TOOLGROUP, BUILTIN_SOURCE)
            for name, description, parameters in _BUILTIN]


def catalog_tool(name: str, description: str, parameters: list[ToolParameter], provider_id: str,
                 toolgroup_id: str, server_source: str) -> CatalogTool:
    return {"identifier": name, "description": description, "parameters": parameters, "provider_id": provider_id,
            "toolgroup_id": toolgroup_id, "server_source": server_source, "type": "tool"}


def parameters_of(schema: Any) -> list[ToolParameter]:
    """A JSON Schema's properties as LCORE's flat parameter list."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = set(schema.get("required") or ())
    return [{"name": name, "description": str(prop.get("description", "")) if isinstance(prop, dict) else "",
             "parameter_type": prop.get("type", "string") if isinstance(prop, dict) else "string",
             "required": name in required, "default": prop.get("default") if isinstance(prop, dict) else None}
            for name, prop in schema["properties"].items()]


def clean_description(description: str | None) -> str:
    """LCORE's `extract_clean_description` for descriptions written as metadata lines."""
    text = description or ""
    if "TOOL_NAME=" not in text and "DISPLAY_NAME=" not in text:
        return text
    for part in text.split("\n\n"):
        stripped = part.strip()
        if len(stripped) > 20 and not stripped.startswith(_METADATA_PREFIXES):
            return stripped
    for line in text.split("\n"):
        if line.startswith("USECASE="):
            return line[len("USECASE="):].strip()
    return text[:200] + "..." if len(text) > 200 else text


class ToolCatalog:
    def __init__(self, tools: ConfiguredTools, upstream: UpstreamClient | None = None):
        self._tools = tools
        self._upstream = upstream

    async def list(self, identity: Identity, headers: Mapping[str, str]) -> ToolList:
        await self._tools.probe_oauth(None, None, identity, headers)   # LCORE: 401 + WWW-Authenticate first
        if self._upstream is not None:
            # Any answer will do (a server without Llama Stack's providers API says 404);
            # no answer is the client's 503 with the configured display name.
            await self._upstream.request("GET", PROVIDERS_PATH, timeout=_PROVIDERS_TIMEOUT)
        catalog = builtin_tools()
        unavailable: list[UnavailableServer] = []
        servers = self._tools.servers
        listed = await asyncio.gather(*(self._server_tools(server, identity, headers) for server in servers))
        for server, (tools, reason) in zip(servers, listed):
            catalog += tools
            if reason is not None:
                unavailable.append({"name": server.name, "reason": reason})
        body: ToolList = {"tools": catalog}
        if unavailable:
            body["unavailable_servers"] = unavailable
        return body

    async def _server_tools(self, server: McpServerConfig, identity: Identity,
                            headers: Mapping[str, str]) -> tuple[builtins.list[CatalogTool], str | None]:
        resolved, missing = self._tools.server_headers(server, identity, headers)
        if resolved is None:
            log.warning("MCP server %s skipped in the tool list: %s", server.name, missing)
            return [], f"skipped: {missing}"
        try:
            # Every request of the listing session (its `initialize` too) carries them.
            listing = await list_tools(McpServer(server.name, server.url, on_the_wire(resolved),
                                                 server.timeout or DEFAULT_TIMEOUT))
        except McpFailure as failure:
            message = self._tools.redactor.text(str(failure.error.get("message") or "listing failed"))
            log.warning("MCP server %s could not be listed: %s", server.name, message)
            return [], f"listing failed: {message}"
        return [catalog_tool(tool["name"], clean_description(tool.get("description")),
                             parameters_of(tool.get("input_schema")), server.provider_id, server.name, server.url)
                for tool in listing.tools], None

    def client_options(self) -> ClientOptions:
        """LCORE's `/v1/mcp-auth/client-options`: the servers that take headers from the
        client (`client` in `authorization_headers`; `oauth` ones are discovered through
        the probe's 401 instead, as in LCORE), and which."""
        return {"servers": [{"name": server.name, "client_auth_headers": names} for server in self._tools.servers
                            if (names := [name for name, source in server.authorization_headers.items()
                                          if source.strip() == "client"])]}
