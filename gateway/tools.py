"""The tools the operator configured, resolved for one request.

`tools` omitted or null means every configured tool: one `file_search` over all
`byok_rag` vector stores and one `mcp` tool per `mcp_servers` entry with its headers.
Explicit tools are used as given, except that MCP servers the operator configured
(matched by `server_label`) get their URL and headers, and file_search `rag_id`s are
translated to the vector store ids behind them. `tool_choice: "none"` sends no tools.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

import orjson

from gateway.config import Configuration, McpServerConfig
from gateway.identity import Identity
from gateway.schema.errors import validation_error

log = logging.getLogger("gateway.tools")

_FROM_CALLER = ("client", "oauth")


class ConfiguredTools:
    def __init__(self, config: Configuration):
        self._servers = {server.name: server for server in config.mcp_servers}
        self._rag_ids = {store.rag_id: store.vector_db_id for store in config.byok_rag}
        self._secrets = {name: _read_secrets(server) for name, server in self._servers.items()}

    def for_request(self, tools: list[dict[str, Any]] | None, tool_choice: Any, identity: Identity,
                    headers: Mapping[str, str]) -> list[dict[str, Any]] | None:
        """The tools to send upstream, or None to send none."""
        if tool_choice == "none":
            return None
        if tools is None:
            return self.defaults(identity, headers) or None
        return [self._complete(tool, index, identity, headers) for index, tool in enumerate(tools)]

    def defaults(self, identity: Identity, headers: Mapping[str, str]) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        if self._rag_ids:
            tools.append({"type": "file_search", "vector_store_ids": list(dict.fromkeys(self._rag_ids.values()))})
        for server in self._servers.values():
            server_headers = self._headers(server, identity, headers)
            if server_headers is not None:
                tools.append(_mcp_tool(server, server_headers))
        return tools

    def _complete(self, tool: dict[str, Any], index: int, identity: Identity,
                  headers: Mapping[str, str]) -> dict[str, Any]:
        if tool.get("type") == "file_search":
            ids = [self._rag_ids.get(store_id, store_id) for store_id in tool["vector_store_ids"]]
            return {**tool, "vector_store_ids": ids}
        if tool.get("type") != "mcp":
            return tool
        server = self._servers.get(tool["server_label"])
        if server is None:
            if not tool.get("server_url") and not tool.get("connector_id"):
                raise validation_error(f"tools[{index}].server_url: required for MCP server "
                                       f"'{tool['server_label']}', which is not configured",
                                       param="tools", code="missing_required_parameter")
            return _with_headers(tool, tool.get("headers") or {})
        server_headers = self._headers(server, identity, headers) or {}
        completed = {**tool, "server_url": tool.get("server_url") or server.url}
        # The operator's headers win: a client must not replace the credentials the
        # gateway attaches to a server it configured.
        completed = _with_headers(completed, {**(tool.get("headers") or {}), **server_headers})
        completed.setdefault("require_approval", _approval(server))
        return completed

    def _headers(self, server: McpServerConfig, identity: Identity,
                 headers: Mapping[str, str]) -> dict[str, str] | None:
        """The headers for one server, or None when a required one cannot be resolved."""
        resolved = {name: headers[name] for name in server.headers if name in headers}
        caller_headers = _mcp_headers(headers).get(server.name) or _mcp_headers(headers).get(server.url) or {}
        for name, source in server.authorization_headers.items():
            if source == "kubernetes":
                value = f"Bearer {identity.token}" if identity.token else None
            elif source in _FROM_CALLER:
                value = caller_headers.get(name)
            else:
                value = self._secrets[server.name].get(name)
            if not value:
                log.warning("MCP server %s skipped: header %s (from %s) could not be resolved",
                            server.name, name, source)
                return None
            resolved[name] = value
        return resolved


def _mcp_tool(server: McpServerConfig, headers: dict[str, str]) -> dict[str, Any]:
    return _with_headers({"type": "mcp", "server_label": server.name, "server_url": server.url,
                          "require_approval": _approval(server)}, headers)


def _with_headers(tool: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """Put headers on an MCP tool the way the Responses API takes them.

    The bearer credential goes in the tool's `authorization` field, bare: Llama Stack
    refuses an `Authorization` entry in `headers` and sends `authorization` as
    `Authorization: Bearer <value>` (OpenAI's API takes the same field).
    """
    tool = {key: value for key, value in tool.items() if key != "headers"}
    rest = {}
    for name, value in headers.items():
        if name.lower() == "authorization":
            scheme, _, token = value.strip().partition(" ")
            tool["authorization"] = token.strip() if scheme.lower() == "bearer" and token else value.strip()
        else:
            rest[name] = value
    if rest:
        tool["headers"] = rest
    return tool


def _approval(server: McpServerConfig) -> Any:
    value = server.require_approval
    return value if isinstance(value, str) else value.model_dump()


def _read_secrets(server: McpServerConfig) -> dict[str, str]:
    """Header values the configuration points at files for (read once, at start-up)."""
    secrets = {}
    for name, source in server.authorization_headers.items():
        if source in ("kubernetes", *_FROM_CALLER):
            continue
        try:
            secrets[name] = Path(source).read_text().strip()
        except OSError as exc:
            log.warning("MCP server %s: cannot read header %s from %s (%s)", server.name, name, source,
                        exc.strerror)
    return secrets


def _mcp_headers(headers: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """LCORE's `MCP-HEADERS` request header: `{"<server name or url>": {"Header": "value"}}`."""
    raw = headers.get("MCP-HEADERS")
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise validation_error("MCP-HEADERS must be a JSON object of objects", param="MCP-HEADERS",
                               code="invalid_mcp_headers") from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise validation_error("MCP-HEADERS must be a JSON object of objects", param="MCP-HEADERS",
                               code="invalid_mcp_headers")
    return value
