"""The access-control blocks of the configuration: `api_key_config`, LCORE's actions and
`authorization.access_rules`, and `role_rules`. Split from the package's `__init__`
(which re-exports them) to keep each module small; it imports only `base`."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, TypeAdapter, model_validator

from gateway.config.base import Strict


class ApiKeyEntry(Strict):
    """Ours: one team's key, with its own identity and roles."""

    key: SecretStr | None = None
    key_file: str | None = None          # a file holding the key (surrounding whitespace ignored)
    user_id: str = Field(min_length=1)
    username: str | None = None          # default: user_id
    roles: list[str] = []

    @property
    def secret(self) -> SecretStr:
        """The key, given as `key` or read from `key_file` (`_one_key` makes it set)."""
        assert self.key is not None
        return self.key

    @model_validator(mode="after")
    def _one_key(self) -> "ApiKeyEntry":
        if (self.key is None) == (self.key_file is None):
            raise ValueError("give exactly one of key and key_file")
        if self.key_file is not None:
            try:
                value = Path(self.key_file).read_text().strip()
            except OSError as exc:
                raise ValueError(f"key_file: cannot read {self.key_file} ({exc.strerror})") from None
            if not value:
                raise ValueError(f"key_file: {self.key_file} is empty")
            self.key = SecretStr(value)
        elif self.key is not None and not self.key.get_secret_value():
            raise ValueError("key: must not be empty")
        return self


class ApiKeyConfig(Strict):
    """`api-key-token`: LCORE's one `api_key` (LCORE's default user), and our `keys`."""

    api_key: SecretStr | None = None
    keys: list[ApiKeyEntry] = []

    @model_validator(mode="after")
    def _some_key(self) -> "ApiKeyConfig":
        if self.api_key is not None and not self.api_key.get_secret_value():
            raise ValueError("api_key: must not be empty")
        if self.api_key is None and not self.keys:
            raise ValueError("at least one of api_key and keys is required")
        seen = [self.api_key.get_secret_value()] if self.api_key is not None else []
        for index, entry in enumerate(self.keys):
            if entry.secret.get_secret_value() in seen:
                # One key must mean one identity (the message does not show the key).
                raise ValueError(f"keys[{index}]: the same key is configured twice")
            seen.append(entry.secret.get_secret_value())
        return self


class Action(StrEnum):
    """LCORE's actions (`authorization.access_rules[].actions`), all of them, so an LCORE
    file's rules load unchanged; the gateway's routes use the ones in `gateway/http/operations.py`."""

    ADMIN = "admin"                                    # alone in its rule; grants every action
    LIST_OTHERS_CONVERSATIONS = "list_other_conversations"
    READ_OTHERS_CONVERSATIONS = "read_other_conversations"
    QUERY_OTHERS_CONVERSATIONS = "query_other_conversations"
    DELETE_OTHERS_CONVERSATIONS = "delete_other_conversations"
    QUERY = "query"
    RESPONSES = "responses"
    STREAMING_QUERY = "streaming_query"
    GET_CONVERSATION = "get_conversation"
    LIST_CONVERSATIONS = "list_conversations"
    DELETE_CONVERSATION = "delete_conversation"
    UPDATE_CONVERSATION = "update_conversation"
    FEEDBACK = "feedback"
    GET_MODELS = "get_models"
    GET_TOOLS = "get_tools"
    GET_SKILLS = "get_skills"
    GET_SHIELDS = "get_shields"
    LIST_PROVIDERS = "list_providers"
    GET_PROVIDER = "get_provider"
    LIST_RAGS = "list_rags"
    GET_RAG = "get_rag"
    GET_METRICS = "get_metrics"
    GET_CONFIG = "get_config"
    INFO = "info"
    MODEL_OVERRIDE = "model_override"                  # naming a model the gateway would not pick
    RLSAPI_V1_INFER = "rlsapi_v1_infer"
    REGISTER_MCP_SERVER = "register_mcp_server"
    LIST_MCP_SERVERS = "list_mcp_servers"
    DELETE_MCP_SERVER = "delete_mcp_server"
    A2A_AGENT_CARD = "a2a_agent_card"
    A2A_TASK_EXECUTION = "a2a_task_execution"
    A2A_MESSAGE = "a2a_message"
    A2A_JSONRPC = "a2a_jsonrpc"
    MANAGE_VECTOR_STORES = "manage_vector_stores"
    READ_VECTOR_STORES = "read_vector_stores"
    MANAGE_FILES = "manage_files"
    MANAGE_PROMPTS = "manage_prompts"
    READ_PROMPTS = "read_prompts"
    MANAGE_SAVED_PROMPTS = "manage_saved_prompts"


ALL_ACTIONS = frozenset(Action)
OTHERS_CONVERSATIONS_ACTIONS = frozenset({
    Action.LIST_OTHERS_CONVERSATIONS, Action.READ_OTHERS_CONVERSATIONS, Action.QUERY_OTHERS_CONVERSATIONS,
    Action.DELETE_OTHERS_CONVERSATIONS})
# What everyone may do when no `access_rules` are configured. LCORE grants everything but
# `admin` there, including the `*_other_conversations` actions (every user reads and
# deletes every other user's conversations); the gateway does not.
DEFAULT_ACTIONS = ALL_ACTIONS - {Action.ADMIN} - OTHERS_CONVERSATIONS_ACTIONS


class AccessRule(Strict):
    role: str = Field(min_length=1)      # `*` is everyone's role
    actions: list[Action]

    @model_validator(mode="after")
    def _admin_alone(self) -> "AccessRule":
        if Action.ADMIN in self.actions and len(self.actions) > 1:
            # As LCORE: admin grants everything, so listing more beside it is a mistake.
            raise ValueError("actions: 'admin' must be alone in its rule (it grants every action)")
        return self


class AuthorizationConfig(Strict):
    access_rules: list[AccessRule] = []


class RoleRule(Strict):
    """LCORE's `jwt_configuration.role_rules[]`: roles granted when `operator` holds between
    the list of every JSONPath match in the identity document and `value`."""

    jsonpath: str
    operator: Literal["equals", "contains", "in", "match"]
    negate: bool = False
    value: Any
    roles: list[str]

    @model_validator(mode="after")
    def _valid(self) -> "RoleRule":
        from jsonpath_ng.parser import parse  # only a configuration with role rules loads it (start-up memory)

        try:
            parse(self.jsonpath)
        except Exception as exc:  # the lexer and the parser raise their own exception types
            raise ValueError(f"jsonpath: invalid JSONPath expression {self.jsonpath!r}: {exc}") from None
        if not self.roles:
            raise ValueError("roles: at least one role is required")
        if len(self.roles) != len(set(self.roles)):
            raise ValueError("roles: must be unique")
        if "*" in self.roles:
            raise ValueError("roles: '*' is everyone's role; a rule cannot grant it")
        if self.operator == "match":
            if not isinstance(self.value, str):
                raise ValueError(f"value: the match operator needs a regular expression string, "
                                 f"got {type(self.value).__name__}")
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"value: invalid regular expression {self.value!r}: {exc}") from None
        return self


role_rules_adapter = TypeAdapter(list[RoleRule])


def raw_role_rules(jwk_config: Any) -> Any:
    """`jwk_config.jwt_configuration.role_rules`, where LCORE keeps them; they apply to
    every module's identity document, so they are read whatever the module."""
    def get(block: Any, key: str) -> Any:
        return block.get(key) if isinstance(block, dict) else getattr(block, key, None)

    return get(get(jwk_config, "jwt_configuration"), "role_rules") if jwk_config is not None else None
