"""The running configuration as LCORE's `GET /v1/config` shows it: every key, every
secret as `**********` (what pydantic writes for LCORE's `SecretStr` fields).

Our models keep some secrets as plain strings (the upstream's and the tools' API keys,
the compaction secrets), so the secrets are named here by their keys; a unit test walks
every configuration model and fails on a field whose name says secret that this does
not mask."""

from __future__ import annotations

from typing import Any

from gateway.config import Configuration

MASK = "**********"
# Keys whose string values are secrets, wherever they are in the configuration.
SECRET_KEYS = frozenset({"api_key", "search_api_key", "secret", "password", "key", "token", "client_secret",
                         "tls_key_password"})


def masked(config: Configuration) -> dict[str, Any]:
    dumped: dict[str, Any] = _masked(config.model_dump(mode="json"))
    return dumped


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: MASK if key in SECRET_KEYS and value[key] is not None else _masked(value[key])
                for key in value}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value
