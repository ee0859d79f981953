"""The tools' sections: LCORE's `mcp_servers` and `byok_rag`; ours, `client_tools` (what
a request may name beyond them) and the local engine's own tool back ends (engine mode
only): the search endpoint behind `web_search` and the moderation endpoint behind the
request's `guardrails`. Forward mode passes both tool and field to the upstream."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.base import Strict, http_url


def _is_network(value: str) -> bool:
    try:
        ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        return False
    return True


class WebSearchConfig(Strict):
    """The endpoint a `web_search` tool searches (docs/engine.md, web_search
    documents its small HTTP contract). Without this section a request's `web_search`
    tool is a 422 in engine mode."""

    url: str
    api_key: str | None = None          # sent as `Authorization: Bearer <api_key>`
    timeout: float = Field(10, gt=0)    # seconds for the whole search; then an error result
    max_results: int = Field(5, ge=1, le=50)

    _url_shape = field_validator("url")(lambda cls, value: http_url(value))


class GuardrailsConfig(Strict):
    """Where a request's `guardrails` are checked: an OpenAI-compatible
    `POST /v1/moderations` (each guardrail id is the moderation `model`)."""

    moderation_url: str | None = None   # the endpoint itself; None: the upstream's /v1/moderations
    api_key: str | None = None          # for moderation_url (the upstream's own key otherwise)
    timeout: float = Field(10, gt=0)
    # Unreachable moderation: refuse (the default: input → 503, output → response.failed)
    # or let the text through unchecked (logged).
    fail_open: bool = False
    # The answer is held back and checked per sentence (None), or every this many
    # characters.
    output_window: int | None = Field(None, ge=1)

    _url_shape = field_validator("moderation_url")(lambda cls, value: http_url(value))


class ApprovalFilter(Strict):
    always: list[str] = []
    never: list[str] = []


class McpServerConfig(Strict):
    name: str = Field(min_length=1)
    provider_id: str = "model-context-protocol"
    url: str
    # Header name -> where its value comes from: a file path (its contents), or the
    # keywords `kubernetes` (the caller's bearer token), `client` or `oauth` (the
    # caller's MCP-HEADERS request header).
    authorization_headers: dict[str, str] = {}
    # Incoming request headers to pass on to this server (case-insensitive).
    headers: list[str] = []
    require_approval: Literal["always", "never"] | ApprovalFilter = "never"
    timeout: float | None = None

    _url_shape = field_validator("url")(lambda cls, value: http_url(value))


class ByokRagConfig(Strict):
    rag_id: str = Field(min_length=1)
    vector_db_id: str = Field(min_length=1)
    rag_type: str = "inline::faiss"
    embedding_model: str | None = None
    embedding_dimension: int | None = None
    db_path: str | None = None
    # Weighs this store's scores against other stores' when file_search merges results
    # (the ranking uses score × score_multiplier).
    score_multiplier: float = Field(1.0, ge=0)
    # Ours (engine mode). The base URL of the OpenAI-compatible vector store API that
    # holds this store (`POST <search_url>/v1/vector_stores/<vector_db_id>/search`);
    # unset: the upstream (`llama_stack.url`, with its api_key).
    search_url: str | None = None
    # Ours (engine mode). Sent to `search_url` as `Authorization: Bearer <key>` (use
    # `${env.VAR}`); never to the client or the model.
    search_api_key: str | None = None
    # Ours (engine mode). Seconds one search of this store may take before the model is
    # told it failed.
    search_timeout: float = Field(30, gt=0)

    _search_url_shape = field_validator("search_url")(lambda cls, value: http_url(value))

    @model_validator(mode="after")
    def _key_needs_url(self) -> "ByokRagConfig":
        if self.search_api_key and not self.search_url:
            raise ValueError("search_api_key needs search_url (searches on the upstream use llama_stack.api_key)")
        return self


class ClientToolsConfig(Strict):
    """Ours: what clients may ask for beyond the tools the operator configured."""

    # file_search over vector stores that are not in `byok_rag` (by rag_id or vector
    # store id). Off: a client cannot search another tenant's store on the upstream.
    allow_unconfigured_vector_stores: bool = False
    # MCP servers a request names itself (a server_label not in mcp_servers, with its
    # server_url), in both modes. Off: 422. On: only public addresses (gateway/destinations.py).
    allow_unconfigured_mcp_servers: bool = False
    # Exceptions to those address rules: CIDRs ("10.20.0.0/16", "fd00::/8") and host
    # names (exact; whatever address they resolve to).
    allowed_mcp_destinations: list[str] = []
    # Engine mode: the upstream fetches `input_image` URLs itself, so they follow the
    # same address rules (https and data: only); these are the exceptions, alike.
    allowed_image_destinations: list[str] = []
    # Engine mode: what a client's own MCP server may send the gateway (the operator's
    # servers are not capped: the operator chose them). Bytes of one HTTP response from
    # the server (one JSON-RPC message, or the SSE stream answering one request): past
    # it the operation fails. A listing of more tools than max_mcp_tools, or with a tool
    # whose definition (name, description, input and output schema, as JSON) is longer
    # than max_mcp_tool_schema_bytes, fails: the model gets none of that server's tools.
    max_mcp_message_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    max_mcp_tools: int = Field(128, ge=1)
    max_mcp_tool_schema_bytes: int = Field(32 * 1024, ge=256)

    @field_validator("allowed_mcp_destinations", "allowed_image_destinations")
    @classmethod
    def _destinations(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if not re.fullmatch(r"[0-9A-Za-z.:_/-]+", entry.strip()):
                raise ValueError(f"must be CIDRs or host names, got {entry!r}")
            if "/" in entry and not _is_network(entry):
                raise ValueError(f"{entry!r} is not a valid CIDR")
        return entries
