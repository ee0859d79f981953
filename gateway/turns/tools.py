"""The tools the operator configured, resolved for one request.

`tools` omitted or null means every configured tool: one `file_search` over all
`byok_rag` vector stores and one `mcp` tool per `mcp_servers` entry with its headers.
Explicit tools are used as given, except that:

- an MCP server the operator configured (matched by `server_label`) gets its URL and
  credentials; its URL cannot be replaced by the client (request validation refuses
  that, see `InputToolMCP`), so the operator's credentials only ever go to the
  operator's server; the client's `require_approval` may only tighten the
  operator's (`mcp_approval.py`);
- an MCP server the operator did not configure (the client's own `server_url`, or a
  `connector_id` under a label the operator did not configure) is
  refused unless `client_tools.allow_unconfigured_mcp_servers` is set, and then only
  on a public address (`gateway/destinations.py`): an IP address in the URL is judged
  here; a host name is judged on what it resolves to, by `check_client_servers` for
  forward mode (just before the upstream connects) and at connect time by the engine;
- a `file_search` may name only configured stores, by `rag_id` (translated to the
  vector store behind it) or by vector store id, unless
  `client_tools.allow_unconfigured_vector_stores` says otherwise: other tenants'
  stores on the same upstream stay out of reach.

With `X-LCS-Merge-Server-Tools: true` the client's tools come first, then the
configured ones; a client tool that would shadow a configured one is a 409 (LCORE).
`tool_choice: "none"` sends no tools.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Mapping

import aiohttp
import orjson
from multidict import CIMultiDict

from gateway import outbound
from gateway.config import Configuration, McpServerConfig
from gateway.destinations import RESOLVE_TIMEOUT, DestinationPolicy, ForbiddenDestination
from gateway.identity import Identity
from gateway.mcp_approval import tighter
from gateway.redaction import Redactor
from gateway.schema.errors import ApiError, invalid_attribute, not_found, tool_conflict
from gateway.request_scope import REQUEST
from gateway.schema.json_types import JsonObject

# How long the OAuth probe waits for a server's answer.
OAUTH_PROBE_TIMEOUT = 5.0
# What the probe sends: an MCP `initialize` (with the turn's headers: `_probe`).
_PROBE_BODY = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "gateway-oauth-probe",
                                                                          "version": "1"}}})

log = logging.getLogger("gateway.turns.tools")

_FROM_CALLER = ("client", "oauth")
MERGE_HEADER = "X-LCS-Merge-Server-Tools"


class ConfiguredTools:
    def __init__(self, config: Configuration):
        self._servers = {server.name: server for server in config.mcp_servers}
        self._stores = {store.rag_id: store.vector_db_id for store in config.byok_rag}
        self._store_ids = frozenset(self._stores.values())
        self._any_store = config.client_tools.allow_unconfigured_vector_stores
        # Where clients' own MCP servers may be; None: they are refused.
        self.client_mcp = DestinationPolicy.of(config.client_tools.allowed_mcp_destinations) \
            if config.client_tools.allow_unconfigured_mcp_servers else None
        self._secrets = {name: _read_secrets(server) for name, server in self._servers.items()}
        # What the upstream's words are scrubbed of: the credentials and URLs the gateway sends.
        self.redactor = Redactor.of(config, self._secrets)
        # What request validation needs: which labels are configured, and at which URL.
        self.server_urls: dict[str, str] = {name: server.url for name, server in self._servers.items()}
        self.labels = frozenset(self._servers)

    def for_request(self, tools: list[dict[str, Any]] | None, tool_choice: Any, identity: Identity,
                    headers: Mapping[str, str]) -> list[dict[str, Any]] | None:
        """The tools to send upstream, or None to send none."""
        if tool_choice == "none":
            return None
        if tools is None:
            return self.defaults(identity, headers) or None
        chosen = [self._complete(tool, identity, headers) for tool in tools]
        if headers.get(MERGE_HEADER, "").lower() == "true":
            chosen += self._merged_defaults(chosen, identity, headers)
        return chosen

    def check(self, tools: list[JsonObject] | None, tool_choice: Any) -> None:
        """The refusals of `for_request` that need no credential, the caller's headers
        or the network: a vector store the client may not search, a client's own MCP
        server where they are not taken or whose URL is literally forbidden."""
        if tool_choice == "none":
            return
        for tool in tools or ():
            if tool.get("type") == "file_search":
                for store_id in tool["vector_store_ids"]:
                    self._store(store_id)
            elif tool.get("type") == "mcp" and tool["server_label"] not in self._servers:
                self._check_client_url(tool)

    async def probe_oauth(self, tools: list[dict[str, Any]] | None, tool_choice: Any, identity: Identity,
                          headers: Mapping[str, str]) -> None:
        """LCORE's OAuth probe (its pipeline's step 2), as LCORE main does it: every server
        this request would use that will get an `Authorization` header from any source
        (a file, `kubernetes`, `client`, `oauth`), or that has an `oauth` header, is
        asked first, with the headers the turn's own requests to it carry (the forwarded
        `headers` the request has, and every `authorization_headers` entry that
        resolves: Authorization when it does, none when it does not). A 401 (the header
        missing or refused) is the caller's 401, with the server's `WWW-Authenticate`,
        so the client can start the OAuth flow.
        Any other answer, or none (the gateway is more lenient than LCORE here), leaves
        the turn to go on: the server is used, or skipped when a header is missing.
        A configured server the turn would only use by default, whose `client` header the
        caller omitted, is not asked: LCORE skips it (the turn and `/v1/tools` go on
        without it); an omitted `oauth` one is asked, as is a server the client names."""
        if tool_choice == "none":
            return
        labels = None if tools is None else {tool.get("server_label") for tool in tools if tool.get("type") == "mcp"}
        if headers.get(MERGE_HEADER, "").lower() == "true":
            labels = None
        probes = []
        for server in self._servers.values():
            if labels is not None and server.name not in labels:
                continue
            if labels is None and any(source == "client" and not _caller_header(server, name, headers)
                                      for name, source in server.authorization_headers.items()):
                continue   # the configured tools skip it (`defaults`), as LCORE
            # Asked when it gets an Authorization header, or another header the OAuth
            # flow gives is missing.
            if any(name.lower() == "authorization" for name in server.authorization_headers) \
                    or any(source == "oauth" and not _caller_header(server, name, headers)
                           for name, source in server.authorization_headers.items()):
                probes.append(_probe(server, self._sent_headers(server, identity, headers)))
        if probes:
            await asyncio.gather(*probes)

    def usable_servers(self, identity: Identity, headers: Mapping[str, str]) -> dict[str, str]:
        """The configured MCP servers whose headers resolve for this request (label →
        URL): what LCORE's `get_mcp_tools` gives a turn that names its tools itself
        (`/v1/infer`); a server skipped here is logged by `_headers`."""
        return {server.name: server.url for server in self._servers.values()
                if self._headers(server, identity, headers) is not None}

    def defaults(self, identity: Identity, headers: Mapping[str, str]) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        if self._stores:
            tools.append({"type": "file_search", "vector_store_ids": list(dict.fromkeys(self._stores.values()))})
        for server in self._servers.values():
            server_headers = self._headers(server, identity, headers)
            if server_headers is not None:
                tools.append(_mcp_tool(server, server_headers))
        return tools

    def _merged_defaults(self, client: list[dict[str, Any]], identity: Identity,
                         headers: Mapping[str, str]) -> list[dict[str, Any]]:
        """The configured tools to add after the client's, refusing what would clash."""
        configured = self.defaults(identity, headers)
        labels = {tool["server_label"] for tool in configured if tool["type"] == "mcp"}
        for tool in client:
            if tool.get("type") == "mcp" and tool.get("server_label") in labels:
                raise tool_conflict(f"Client MCP tool with server_label '{tool['server_label']}' conflicts with a "
                                    "server-configured MCP tool. Rename the client tool to avoid the conflict.")
            if tool.get("type") == "file_search" and any(t["type"] == "file_search" for t in configured):
                raise tool_conflict("Client file_search tool conflicts with a server-configured file_search tool. "
                                    "Remove the client file_search to use the server's configuration.")
        return configured

    def _complete(self, tool: dict[str, Any], identity: Identity, headers: Mapping[str, str]) -> dict[str, Any]:
        if tool.get("type") == "file_search":
            return {**tool, "vector_store_ids": [self._store(store_id) for store_id in tool["vector_store_ids"]]}
        if tool.get("type") != "mcp":
            return tool
        server = self._servers.get(tool["server_label"])
        if server is None:
            # A client's own server, named by URL or by `connector_id` alike: both are
            # refused unless clients' servers are allowed, and a URL is judged.
            self._check_client_url(tool)
            return _with_headers(tool, tool.get("headers") or {})
        server_headers = self._headers(server, identity, headers) or {}
        # The operator's URL, never a connector the upstream would resolve elsewhere:
        # the operator's credentials go only to the operator's server.
        completed = {**{key: value for key, value in tool.items() if key != "connector_id"}, "server_url": server.url}
        # The operator's headers win: a client must not replace the credentials the
        # gateway attaches to a server it configured.
        completed = _with_headers(completed, {**(tool.get("headers") or {}), **server_headers})
        # The client may only tighten the operator's approval policy (mcp_approval.py):
        # the call runs with the operator's credentials.
        completed["require_approval"] = tighter(_approval(server), tool.get("require_approval"))
        return completed

    def _check_client_url(self, tool: dict[str, Any]) -> None:
        """422 unless clients' own servers are allowed and this URL (if any: a
        `connector_id` alone has none) is not literally forbidden (its scheme, an IP
        address of a forbidden kind)."""
        if self.client_mcp is None:
            raise invalid_attribute(f"MCP server {tool['server_label']!r} is not configured, and this gateway does "
                                    "not take clients' own MCP servers", param="tools", code="mcp_server_not_allowed")
        if not tool.get("server_url"):
            return  # a connector: the upstream resolves it, there is no address to judge here
        try:
            self.client_mcp.check_url(tool["server_url"])
        except ForbiddenDestination as refused:
            raise invalid_attribute(str(refused), param="tools", code="mcp_server_forbidden") from None

    async def check_client_servers(self, tools: list[dict[str, Any]] | None) -> None:
        """Forward mode: the upstream connects to a client's server itself, so its host
        name is resolved here and every address checked (422). The upstream resolves
        it again: a name whose answers change between the two can still slip through
        (docs/tools.md, "Clients' own MCP servers"); the engine connects to what it checked."""
        if self.client_mcp is None:
            return
        for tool in tools or ():
            if tool.get("type") != "mcp" or tool.get("server_label") in self._servers or not tool.get("server_url"):
                continue
            try:
                host, port = self.client_mcp.check_url(tool["server_url"])
                if self.client_mcp.host_allowed(host):
                    continue  # the operator trusts the name, whatever it resolves to
                async with asyncio.timeout(RESOLVE_TIMEOUT):
                    await self.client_mcp.resolve(host, port)
            except ForbiddenDestination as refused:
                raise invalid_attribute(str(refused), param="tools", code="mcp_server_forbidden") from None
            except TimeoutError:
                raise invalid_attribute(f"MCP server {tool['server_label']!r}: its host could not be resolved",
                                        param="tools", code="mcp_server_forbidden") from None

    def _store(self, store_id: str) -> str:
        """The upstream vector store a client's id names, if the client may search it."""
        if store_id in self._stores:
            return self._stores[store_id]
        if store_id in self._store_ids or self._any_store:
            return store_id
        # Unknown and foreign stores look alike, so store ids cannot be probed.
        raise not_found("Vector store", store_id, code="vector_store_not_found", param="tools")

    def _headers(self, server: McpServerConfig, identity: Identity,
                 headers: Mapping[str, str]) -> dict[str, str] | None:
        """The headers for one server, or None when a required one cannot be resolved."""
        resolved, missing = self.server_headers(server, identity, headers)
        if missing is not None:
            log.warning("MCP server %s skipped: %s", server.name, missing)
        return resolved

    def server_headers(self, server: McpServerConfig, identity: Identity,
                       headers: Mapping[str, str]) -> tuple[dict[str, str] | None, str | None]:
        """The headers for one server, or None and why (a required header that cannot be
        resolved: the server is skipped for this request; `/v1/tools` reports it)."""
        resolved = {name: headers[name] for name in server.headers if name in headers}
        for name, source in server.authorization_headers.items():
            value = self._header(server, name, source, identity, headers)
            if not value:
                kind = source if source in ("kubernetes", *_FROM_CALLER) else "file"
                return None, f"header {name} (from {kind}) could not be resolved"
            resolved[name] = value
        return resolved, None

    def _sent_headers(self, server: McpServerConfig, identity: Identity,
                      headers: Mapping[str, str]) -> dict[str, str]:
        """What every MCP request of the turn to the server carries, as far as it
        resolves: the forwarded headers the request has, and each authorization header
        whose value resolves (Authorization as a bearer, as the turn sends it)."""
        sent = {name: headers[name] for name in server.headers if name in headers}
        for name, source in server.authorization_headers.items():
            value = self._header(server, name, source, identity, headers)
            if value:
                sent[name] = value
        return on_the_wire(sent)

    def _header(self, server: McpServerConfig, name: str, source: str, identity: Identity,
                headers: Mapping[str, str]) -> str | None:
        """One `authorization_headers` entry's value for this request, if it resolves."""
        if source == "kubernetes":
            return f"Bearer {identity.token}" if identity.token else None
        if source in _FROM_CALLER:
            return _caller_header(server, name, headers)
        return self._secrets[server.name].get(name)

    @property
    def servers(self) -> list[McpServerConfig]:
        """The configured MCP servers, in configuration order."""
        return list(self._servers.values())


def _caller_header(server: McpServerConfig, name: str, headers: Mapping[str, str]) -> str | None:
    """A header the caller sent for this server in MCP-HEADERS."""
    sent = _mcp_headers(headers)
    return (sent.get(server.name) or sent.get(server.url) or {}).get(name)


def on_the_wire(resolved: Mapping[str, str]) -> dict[str, str]:
    """A server's resolved headers as the gateway's own MCP requests send them (the
    engine's sessions, `/v1/tools`' listing, the OAuth probe): Authorization as a bearer,
    as the engine sends a turn's tool (`authorization`) and as LCORE probes."""
    return {name: _bearer(value) if name.lower() == "authorization" else value for name, value in resolved.items()}


def _bearer(value: str) -> str:
    """LCORE's `ensure_bearer_prefix`: a bare token is sent as a bearer."""
    value = value.strip()
    return value if " " in value else f"Bearer {value}"


async def _probe(server: McpServerConfig, turn_headers: Mapping[str, str]) -> None:
    """An MCP `initialize` with the headers the turn's requests carry (`_sent_headers`):
    a 401 is the caller's 401 with the server's challenge."""
    challenge = None
    # The protocol's own headers replace a configured one of the same name, in any case.
    sent = CIMultiDict(turn_headers)
    sent["Content-Type"] = "application/json"
    sent["Accept"] = "application/json, text/event-stream"
    if request_id := REQUEST.get()[0]:   # as on every call to the upstream: both logs name the request
        sent["X-Request-ID"] = request_id
    try:
        timeout = aiohttp.ClientTimeout(total=OAUTH_PROBE_TIMEOUT)
        async with aiohttp.ClientSession(timeout=timeout,
                                         trace_configs=outbound.trace_configs("mcp oauth probe")) as session:
            async with session.post(server.url, data=_PROBE_BODY, headers=sent) as reply:
                if reply.status == 401:
                    challenge = reply.headers.get("WWW-Authenticate") or "Bearer"
    except (aiohttp.ClientError, TimeoutError) as exc:
        # Debug only: it runs on every turn that uses the server, which then reports
        # the server's failure itself.
        log.debug("MCP server %s: the OAuth probe failed (%s)", server.name, type(exc).__name__)
    if challenge is not None:
        raise ApiError(401, "Missing or invalid credentials provided by client",
                       f"MCP server at {server.url} requires OAuth", code="mcp_oauth_required",
                       headers={"WWW-Authenticate": challenge})


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
        raise _bad_mcp_headers() from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise _bad_mcp_headers()
    return value


def _bad_mcp_headers() -> ApiError:
    return invalid_attribute("MCP-HEADERS must be a JSON object of objects", param="MCP-HEADERS",
                             code="invalid_mcp_headers")
