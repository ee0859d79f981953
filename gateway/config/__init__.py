"""The gateway's configuration: LCORE's `lightspeed-stack.yaml`, strictly validated.

An existing LCORE file starts the gateway unchanged (docs/architecture.md, decision 5:
configuration is LCORE's). Keys this
gateway implements are typed models with `extra="forbid"`, so a typo fails start-up
with the key's path. LCORE keys for features not built yet are accepted and reported
as warnings; the few whose silent absence would be unsafe (an authentication module
we do not have, a database we cannot reach) are errors instead.

This module holds the whole file (`Configuration`), its warnings and its loading
(`${env.VAR}`, errors naming the key); each section is a module beside it (`service`,
`llama_stack`, `inference`, `auth`, `access`, `database`, `quota`, `tools`,
`customization`, `user_data`), on `base`.
The package imports nothing else of the gateway.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml
from pydantic import PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from gateway.config.access import AccessRule, AuthorizationConfig, RoleRule, raw_role_rules, role_rules_adapter
from gateway.config.auth import (DEFAULT_USER_ID, DEFAULT_USERNAME, LCORE_AUTH_MODULES, SUPPORTED_AUTH_MODULES,
                                 AuthenticationConfig)
from gateway.config.base import Strict, is_not_built, not_built
from gateway.config.compaction import ResponseCompactionConfig
from gateway.config.customization import CustomizationConfig
from gateway.config.observability import ObservabilityConfig
from gateway.config.database import DatabaseConfig, PostgresConfig, SQLiteConfig
from gateway.config.inference import InferenceConfig
from gateway.config.llama_stack import LlamaStackConfig
from gateway.config.quota import QuotaHandlersConfig
from gateway.config.rlsapi import RlsapiV1Config
from gateway.config.shields import QuestionValidityShield, RedactionShield, ShieldConfig
from gateway.config.service import CorsConfig, ServiceConfig
from gateway.config.user_data import ConversationCacheConfig, ConversationExpiryConfig, UserDataCollectionConfig
from gateway.config.tools import (ApprovalFilter, ByokRagConfig, ClientToolsConfig, GuardrailsConfig,
                                  McpServerConfig, WebSearchConfig)

# What callers import from `gateway.config` (the sections live in the modules beside it).
__all__ = [
    "DEFAULT_USER_ID", "DEFAULT_USERNAME", "LCORE_AUTH_MODULES", "SUPPORTED_AUTH_MODULES",
    "ApprovalFilter", "AuthenticationConfig", "ByokRagConfig", "ClientToolsConfig", "ConfigError", "Configuration",
    "ConversationCacheConfig", "ConversationExpiryConfig", "CorsConfig", "CustomizationConfig", "DatabaseConfig", "GuardrailsConfig", "InferenceConfig", "LlamaStackConfig",
    "McpServerConfig", "PostgresConfig", "QuestionValidityShield", "RedactionShield", "ResponseCompactionConfig", "RlsapiV1Config", "SQLiteConfig", "ServiceConfig", "UserDataCollectionConfig", "WebSearchConfig", "load_config", "parse_config",
    "substitute_env",
]


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

    config_format_version: Any = not_built()
    user_data_collection: UserDataCollectionConfig = UserDataCollectionConfig()
    authorization: AuthorizationConfig | None = None
    customization: CustomizationConfig = CustomizationConfig()
    conversation_cache: ConversationCacheConfig = ConversationCacheConfig()
    conversation_expiry: ConversationExpiryConfig = ConversationExpiryConfig()   # ours
    compaction: Any = not_built()
    response_compaction: ResponseCompactionConfig = ResponseCompactionConfig()   # ours: /v1/responses/compact
    approvals: Any = not_built()
    vector_store: Any = not_built()
    a2a_state: Any = not_built()
    quota_handlers: QuotaHandlersConfig | None = None
    azure_entra_id: Any = not_built()
    rlsapi_v1: RlsapiV1Config = RlsapiV1Config()
    splunk: Any = not_built()
    observability: ObservabilityConfig = ObservabilityConfig()   # `otel` accepted, ignored (OTEL_* rule)
    deployment_environment: Any = not_built()
    rag: Any = not_built()
    skills: Any = not_built()
    saved_prompts: Any = not_built()
    shields: list[ShieldConfig] = []
    okp: Any = not_built()
    reranker: Any = not_built()

    _role_rules: list[RoleRule] = PrivateAttr(default_factory=list)

    @field_validator("customization", "conversation_cache", "user_data_collection", "rlsapi_v1", "observability",
                     mode="before")
    @classmethod
    def _empty_section(cls, value: Any) -> Any:
        return {} if value is None else value  # LCORE's `customization:` with nothing under it

    @model_validator(mode="after")
    def _unique_names(self) -> "Configuration":
        names = [server.name for server in self.mcp_servers]
        if len(names) != len(set(names)):
            raise ValueError("mcp_servers names must be unique")
        shields = [shield.name for shield in self.shields]
        if len(shields) != len(set(shields)):
            raise ValueError("shields names must be unique")
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
        # A top-level LCORE section is reported whenever the file has it; a key inside a
        # section we build only when it asks for something (not empty, not its default).
        found = [_unbuilt(key) for key in NOT_BUILT_KEYS if getattr(self, key) is not None]
        for section, key, default in _NOT_BUILT_SECTION_KEYS:
            value = getattr(getattr(self, section), key)
            if value and value != default:
                found.append(_unbuilt(f"{section}.{key}"))
        if self.quota_handlers is not None:
            found += self.quota_handlers.warnings()
        return found


def _unbuilt(key: str) -> str:
    return f"{key}: accepted but not implemented by this version (ignored)"


# The LCORE keys accepted but not built, from the fields marked with `not_built()`: at
# the top level (in field order), and inside the sections that are one model (`service`,
# `llama_stack`, `inference`, `customization`; by key name within a section), with their defaults.
NOT_BUILT_KEYS = tuple(name for name, field in Configuration.model_fields.items() if is_not_built(field))
_NOT_BUILT_SECTION_KEYS = tuple(
    (section, key, inner.default)
    for section, field in Configuration.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, Strict)
    for key, inner in sorted(field.annotation.model_fields.items()) if is_not_built(inner))


class ConfigError(Exception):
    """The configuration cannot be used; `problems` lists `key.path: reason` lines."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


_ENV_PATTERN = re.compile(r"\$\{env\.([A-Za-z_][A-Za-z0-9_]*)(?::=([^}]*))?\}")


def substitute_env(value: Any, path: str = "", environ: Mapping[str, str] | None = None) -> Any:
    """Replace `${env.VAR}` and `${env.VAR:=default}` in every string, like Llama Stack."""
    env = os.environ if environ is None else environ
    if isinstance(value, dict):
        return {key: substitute_env(item, _join(path, key), env) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute_env(item, f"{path}[{index}]", env) for index, item in enumerate(value)]
    if not isinstance(value, str) or "${env." not in value:
        return value

    def replace(match: re.Match[str]) -> str:
        name: str = match.group(1)
        default: str | None = match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError([f"{path}: environment variable {name} is not set and has no default"])

    return _ENV_PATTERN.sub(replace, value)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _describe(error: ErrorDetails) -> str:
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


def load_config(path: str | os.PathLike[str]) -> Configuration:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration file ({exc.strerror})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML ({exc})"]) from None
    return parse_config(data)
