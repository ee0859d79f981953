"""The gateway's configuration: LCORE's `lightspeed-stack.yaml`, strictly validated.

An existing LCORE file starts the gateway unchanged (DESIGN decision 5). Keys this
gateway implements are typed models with `extra="forbid"`, so a typo fails start-up
with the key's path. LCORE keys for features not built yet are accepted and reported
as warnings; the few whose silent absence would be unsafe (an authentication module
we do not have, a database we cannot reach) are errors instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import PrivateAttr, ValidationError, model_validator

from gateway.config.access import AccessRule, AuthorizationConfig, RoleRule, raw_role_rules, role_rules_adapter
from gateway.config.auth import (DEFAULT_USER_ID, DEFAULT_USERNAME, LCORE_AUTH_MODULES, SUPPORTED_AUTH_MODULES,
                                 AuthenticationConfig)
from gateway.config.base import Strict
from gateway.config.database import DatabaseConfig, PostgresConfig, SQLiteConfig
from gateway.config.inference import InferenceConfig
from gateway.config.llama_stack import LlamaStackConfig
from gateway.config.quota import QuotaHandlersConfig
from gateway.config.service import CorsConfig, ServiceConfig
from gateway.config.tools import (ApprovalFilter, ByokRagConfig, ClientToolsConfig, GuardrailsConfig,
                                  McpServerConfig, WebSearchConfig)

# What callers import from `gateway.config` (the sections live in the modules beside it).
__all__ = [
    "DEFAULT_USER_ID", "DEFAULT_USERNAME", "LCORE_AUTH_MODULES", "SUPPORTED_AUTH_MODULES",
    "ApprovalFilter", "AuthenticationConfig", "ByokRagConfig", "ClientToolsConfig", "ConfigError", "Configuration",
    "CorsConfig", "DatabaseConfig", "GuardrailsConfig", "InferenceConfig", "LlamaStackConfig", "McpServerConfig",
    "PostgresConfig", "SQLiteConfig", "ServiceConfig", "WebSearchConfig", "load_config", "parse_config",
    "substitute_env",
]


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
