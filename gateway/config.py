"""The gateway's configuration: LCORE's `lightspeed-stack.yaml`, strictly validated.

An existing LCORE file starts the gateway unchanged (DESIGN decision 5). Keys this
gateway implements are typed models with `extra="forbid"`, so a typo fails start-up
with the key's path. LCORE keys for features not built yet are accepted and reported
as warnings; the few whose silent absence would be unsafe (an authentication module
we do not have, a database we cannot reach) are errors instead.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from gateway.config_access import AccessRule, AuthorizationConfig, RoleRule, raw_role_rules, role_rules_adapter
from gateway.config_auth import (LCORE_AUTH_MODULES, SUPPORTED_AUTH_MODULES,  # noqa: F401 (re-exported)
                                 AuthenticationConfig)
from gateway.config_base import Strict
from gateway.config_database import DatabaseConfig, PostgresConfig, SQLiteConfig  # noqa: F401 (re-exported)
from gateway.config_tools import GuardrailsConfig, WebSearchConfig
from gateway.config_quota import QuotaHandlersConfig

DEFAULT_USER_ID = "00000000-0000-0000-0000-000"
DEFAULT_USERNAME = "lightspeed-user"


def _is_network(value: str) -> bool:
    try:
        ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        return False
    return True


def _http_url(value: str) -> str:
    if not re.match(r"^https?://[^/]", value):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value


class CorsConfig(Strict):
    allow_origins: list[str] = ["*"]
    allow_credentials: bool = False
    allow_methods: list[str] = ["*"]
    allow_headers: list[str] = ["*"]


class ServiceConfig(Strict):
    host: str = "localhost"
    port: int = Field(8080, ge=1, le=65535)
    base_url: str | None = None
    auth_enabled: bool = False
    workers: int = Field(1, ge=1)
    color_log: bool = True
    access_log: bool = True
    root_path: str = ""
    cors: CorsConfig = CorsConfig()
    tls_config: dict[str, Any] | None = None
    # Ours: requests with a larger body get 413 before anything is parsed.
    max_request_body_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    # Ours: a request header (name and value) larger than this gets 431. Real JWTs with
    # many group claims pass aiohttp's 8 KiB default.
    max_header_bytes: int = Field(32 * 1024, ge=1024)
    # Ours: a request's header section must arrive within this many seconds of its first
    # byte, or the connection gets 408 and is closed (gateway/http/server.py).
    header_timeout_seconds: float = Field(10, gt=0, le=300)
    # Ours: error bodies on the endpoints OpenAI SDKs call carry OpenAI's `error` object
    # beside LCORE's `detail` (`both`), or are exactly LCORE's (`lcore`).
    error_body: Literal["both", "lcore"] = "both"

    @field_validator("root_path")
    @classmethod
    def _root_path_shape(cls, value: str) -> str:
        if value and (not value.startswith("/") or value.endswith("/")):
            raise ValueError("must start with '/' and must not end with '/'")
        return value


class LlamaStackConfig(Strict):
    url: str
    api_key: str | None = None
    timeout: float = Field(180, gt=0)
    use_as_library_client: bool | None = None
    library_client_config_path: str | None = None
    max_retries: int = Field(2, ge=0)
    retry_delay: float = Field(0.5, ge=0)
    allow_degraded_mode: bool = False
    config: dict[str, Any] | None = None
    # Ours. Which upstream API serves turns; `auto` probes the upstream on first use.
    api: Literal["auto", "responses", "chat_completions"] = "auto"
    # Ours. Who keeps conversation state: the upstream's Conversations API, the
    # gateway (continuing with previous_response_id), or `auto` (probe on first use).
    conversations: Literal["auto", "upstream", "gateway"] = "auto"
    # Ours. Size of the client connection pool to the upstream: concurrent streams
    # beyond it queue, so it bounds how many turns can run at once.
    max_connections: int = Field(1024, ge=1)
    # Ours. Seconds the model catalog is cached for model selection (`GET /v1/models`
    # always asks the upstream).
    models_cache_seconds: float = Field(60, ge=0)
    # Ours. How errors name the upstream: `Unable to connect to <display_name>` (LCORE
    # 0.6 says `Llama Stack`, LCORE 0.7 `OGX`).
    display_name: str = Field("Llama Stack", min_length=1)

    _url_shape = field_validator("url")(lambda cls, value: _http_url(value))

    @field_validator("use_as_library_client")
    @classmethod
    def _no_library_mode(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError("library client mode is not supported: the gateway needs a Llama Stack "
                             "server at llama_stack.url")
        return value


class InferenceConfig(Strict):
    default_provider: str | None = None
    default_model: str | None = None
    max_infer_iters: int = Field(10, ge=1)
    max_tool_calls: int = Field(30, ge=1)
    # Ours (engine mode only). How a response that ends with calls of the client's
    # function tools ends: `completed` (OpenAI's behaviour, every SDK understands it) or
    # `requires_action` with a `response.requires_action` terminal event (spec 002; not
    # in the `openai` package's types).
    client_tool_status: Literal["completed", "requires_action"] = "completed"
    context_windows: dict[str, int] | None = None
    providers: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> "InferenceConfig":
        if bool(self.default_provider) != bool(self.default_model):
            raise ValueError("default_provider and default_model must be set together")
        return self

    @property
    def default_model_id(self) -> str | None:
        if not self.default_model:
            return None
        return f"{self.default_provider}/{self.default_model}"


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

    _url_shape = field_validator("url")(lambda cls, value: _http_url(value))


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

    _search_url_shape = field_validator("search_url")(lambda cls, value: value if value is None else _http_url(value))

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

    @field_validator("allowed_mcp_destinations")
    @classmethod
    def _destinations(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if not re.fullmatch(r"[0-9A-Za-z.:_/-]+", entry.strip()):
                raise ValueError(f"must be CIDRs or host names, got {entry!r}")
            if "/" in entry and not _is_network(entry):
                raise ValueError(f"{entry!r} is not a valid CIDR")
        return entries


# LCORE keys this gateway accepts but does not act on yet (warned about at start-up).
NOT_BUILT_KEYS = (
    "config_format_version", "user_data_collection", "customization",
    "conversation_cache", "compaction", "approvals", "vector_store", "a2a_state",
    "azure_entra_id", "rlsapi_v1", "splunk", "observability",
    "deployment_environment", "rag", "skills", "saved_prompts", "shields", "okp", "reranker",
)


class Configuration(Strict):
    name: str
    service: ServiceConfig = ServiceConfig()
    llama_stack: LlamaStackConfig
    authentication: AuthenticationConfig = AuthenticationConfig()
    inference: InferenceConfig = InferenceConfig()
    database: DatabaseConfig = DatabaseConfig()
    mcp_servers: list[McpServerConfig] = []
    byok_rag: list[ByokRagConfig] = []
    client_tools: ClientToolsConfig = ClientToolsConfig()
    web_search: WebSearchConfig | None = None   # ours: the engine's web_search back end
    guardrails: GuardrailsConfig = GuardrailsConfig()  # ours: the engine's moderation checks

    config_format_version: Any = None
    user_data_collection: Any = None
    authorization: AuthorizationConfig | None = None
    customization: Any = None
    conversation_cache: Any = None
    compaction: Any = None
    approvals: Any = None
    vector_store: Any = None
    a2a_state: Any = None
    quota_handlers: QuotaHandlersConfig | None = None
    azure_entra_id: Any = None
    rlsapi_v1: Any = None
    splunk: Any = None
    observability: Any = None
    deployment_environment: Any = None
    rag: Any = None
    skills: Any = None
    saved_prompts: Any = None
    shields: Any = None
    okp: Any = None
    reranker: Any = None

    _role_rules: list[RoleRule] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> "Configuration":
        names = [server.name for server in self.mcp_servers]
        if len(names) != len(set(names)):
            raise ValueError("mcp_servers names must be unique")
        rag_ids = [store.rag_id for store in self.byok_rag]
        if len(rag_ids) != len(set(rag_ids)):
            raise ValueError("byok_rag rag_id values must be unique")
        return self

    @model_validator(mode="after")
    def _parse_role_rules(self) -> "Configuration":
        raw = raw_role_rules(self.authentication.jwk_config)
        if raw is None:
            return self
        key = "authentication.jwk_config.jwt_configuration.role_rules"
        try:
            self._role_rules = role_rules_adapter.validate_python(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
            raise ValueError(_keyed(f"{key}{where}", error["msg"].removeprefix("Value error, "))) from None
        return self

    @property
    def role_rules(self) -> list[RoleRule]:
        return self._role_rules

    @property
    def access_rules(self) -> list[AccessRule]:
        return self.authorization.access_rules if self.authorization is not None else []

    def warnings(self) -> list[str]:
        """What the file asks for that this version accepts but does not do."""
        found = [f"{key}: accepted but not implemented by this version (ignored)"
                 for key in NOT_BUILT_KEYS if getattr(self, key) is not None]
        ignored = {
            "service.tls_config": self.service.tls_config,
            "service.workers": self.service.workers if self.service.workers != 1 else None,
            "llama_stack.config": self.llama_stack.config,
            "llama_stack.library_client_config_path": self.llama_stack.library_client_config_path,
            "inference.context_windows": self.inference.context_windows,
            "inference.providers": self.inference.providers,
        }
        found += [f"{key}: accepted but not implemented by this version (ignored)"
                  for key, value in ignored.items() if value]
        if self.quota_handlers is not None:
            found += self.quota_handlers.warnings()
        return found


class ConfigError(Exception):
    """The configuration cannot be used; `problems` lists `key.path: reason` lines."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


_ENV_PATTERN = re.compile(r"\$\{env\.([A-Za-z_][A-Za-z0-9_]*)(?::=([^}]*))?\}")


def substitute_env(value: Any, path: str = "", environ: dict[str, str] | None = None) -> Any:
    """Replace `${env.VAR}` and `${env.VAR:=default}` in every string, like Llama Stack."""
    env = os.environ if environ is None else environ
    if isinstance(value, dict):
        return {key: substitute_env(item, _join(path, key), env) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute_env(item, f"{path}[{index}]", env) for index, item in enumerate(value)]
    if not isinstance(value, str) or "${env." not in value:
        return value

    def replace(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError([f"{path}: environment variable {name} is not set and has no default"])

    return _ENV_PATTERN.sub(replace, value)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _describe(error: dict) -> str:
    path = ""
    for part in error["loc"]:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, part)
    if error["type"] == "extra_forbidden":
        return f"{path}: unknown key"
    return _keyed(path, error["msg"].removeprefix("Value error, "))


def _keyed(path: str, message: str) -> str:
    """`path: message`, where a validator's message may start with the key below `path`
    it is about (`keys[1]: ...`): then the key is named in full."""
    keyed = _KEYED_MESSAGE.match(message)
    if keyed:
        sub = keyed.group(1)
        return f"{path}{'' if sub.startswith('[') or not path else '.'}{sub}: {message[keyed.end():]}"
    return f"{path or '(top level)'}: {message}"


# A validator's message that names the key it is about: `key.path[0]: reason`.
_KEYED_MESSAGE = re.compile(r"^((?:\[\d+\]|[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*|\[\d+\])*): ")


def parse_config(data: Any) -> Configuration:
    if not isinstance(data, dict):
        raise ConfigError(["(top level): the configuration must be a mapping of keys"])
    data = substitute_env(data)
    try:
        return Configuration.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([_describe(error) for error in exc.errors()]) from None


def load_config(path: str | os.PathLike) -> Configuration:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration file ({exc.strerror})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML ({exc})"]) from None
    return parse_config(data)
