"""What the gateway injected into upstream requests never comes back to a client
through the upstream's words (sans-I/O).

The gateway sends the upstream credentials of its own (the upstream's `api_key`, the
MCP headers it read from files for configured servers, the search and moderation
keys) and the URLs of the MCP servers the operator configured. An upstream may repeat
any of them in an error message ("Failed to connect to MCP server at <url>",
"invalid token <key>"). `scrub_tool_echo` (streaming/enrich.py) takes them out of
the `tools` echo; a `Redactor` takes them out of text: error bodies the gateway
relays (`upstream/errors.py`), `response.failed` / error events and response
objects' `error` (the enricher), and items' errors. A credential becomes
`[redacted]`; a configured server's URL (or its bare `host:port`) becomes
`[MCP server '<label>']`, so the message still says which server failed.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from gateway.config import Configuration
from gateway.schema.json_types import JsonObject

# Shorter values would match ordinary text; no real credential is this short.
MIN_SECRET_CHARS = 4
SECRET = "[redacted]"


class Redactor:
    __slots__ = ("_pattern", "_replacements")

    def __init__(self, secrets: Iterable[str] = (), server_urls: Mapping[str, str] | None = None):
        replacements: dict[str, str] = {}
        for label, url in (server_urls or {}).items():
            shown = f"[MCP server {label!r}]"
            replacements[url] = shown
            replacements[url.rstrip("/")] = shown
            netloc = urlsplit(url).netloc
            if netloc:
                replacements[netloc] = shown
        for secret in secrets:
            secret = secret.strip()
            if len(secret) >= MIN_SECRET_CHARS:
                replacements[secret] = SECRET
        self._replacements = replacements
        # Longest first: a URL wins over its own host:port; a port is never cut short.
        alternatives = [re.escape(value) + (r"(?!\d)" if value[-1:].isdigit() else "")
                        for value in sorted(replacements, key=len, reverse=True)]
        self._pattern = re.compile("|".join(alternatives)) if alternatives else None

    @classmethod
    def of(cls, config: Configuration, mcp_secrets: Mapping[str, Mapping[str, str]]) -> "Redactor":
        """The credentials and URLs `config` makes the gateway send; `mcp_secrets` are
        the header values read from files, by server (tools.py reads them once)."""
        secrets = [config.llama_stack.api_key or "",
                   config.web_search.api_key or "" if config.web_search else "",
                   config.guardrails.api_key or "" if config.guardrails else ""]
        secrets += [store.search_api_key or "" for store in config.byok_rag]
        for headers in mcp_secrets.values():
            for value in headers.values():
                scheme, _, token = value.strip().partition(" ")
                secrets += [value, token] if scheme.lower() == "bearer" and token else [value]
        return cls(secrets, {server.name: server.url for server in config.mcp_servers})

    def text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda match: self._replacements[match.group()], text)

    def response(self, response: JsonObject) -> None:
        """A response object's `error` and its output items' errors, in place."""
        if self._pattern is None:
            return
        error = response.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            error["message"] = self.text(error["message"])
        output = response.get("output")
        if isinstance(output, list):
            for item in output:
                self.item(item)

    def item(self, item: Any) -> None:
        """An output item's `error` (a string, or the `openai` error object), in place."""
        if self._pattern is None or not isinstance(item, dict):
            return
        error = item.get("error")
        if isinstance(error, str):
            item["error"] = self.text(error)
        elif isinstance(error, dict):
            if isinstance(error.get("message"), str):
                error["message"] = self.text(error["message"])
            for part in error.get("content") or ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = self.text(part["text"])

    def __bool__(self) -> bool:
        return self._pattern is not None


NOTHING = Redactor()
