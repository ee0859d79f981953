"""The access-control blocks: api_key_config, authorization.access_rules and role_rules,
with errors naming the key (start-up fails, `gateway check-config` says where)."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.config.access import Action

MINIMAL = {"name": "x", "llama_stack": {"url": "http://upstream:8321"}}


def problems(data) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.problems


def with_rules(*rules) -> dict:
    return {**MINIMAL, "authentication": {"module": "noop", "jwk_config": {
        "url": "https://sso.example.com/certs", "jwt_configuration": {"role_rules": list(rules)}}}}


RULE = {"jsonpath": "$.groups[*]", "operator": "contains", "value": "admins", "roles": ["admin"]}


@pytest.mark.parametrize("data, expected", [
    ({**MINIMAL, "authentication": {"module": "api-key-token"}},
     "authentication.api_key_config: required by module api-key-token"),
    ({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {}}},
     "authentication.api_key_config: at least one of api_key and keys is required"),
    ({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {"api_key": ""}}},
     "authentication.api_key_config.api_key: must not be empty"),
    ({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {"keys": [{"user_id": "a"}]}}},
     "authentication.api_key_config.keys[0]: give exactly one of key and key_file"),
    ({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {
        "keys": [{"key": "k-123456", "user_id": "a"}, {"key": "k-123456", "user_id": "b"}]}}},
     "authentication.api_key_config.keys[1]: the same key is configured twice"),
    ({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {
        "keys": [{"key_file": "/nonexistent/key", "user_id": "a"}]}}},
     "authentication.api_key_config.keys[0].key_file: cannot read /nonexistent/key"),
    ({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {
        "keys": [{"key": "k-123456", "user_id": "a", "team": "x"}]}}},
     "authentication.api_key_config.keys[0].team: unknown key"),
    ({**MINIMAL, "authorization": {"access_rules": [{"role": "x", "actions": ["responses", "fly"]}]}},
     "authorization.access_rules[0].actions[1]: Input should be"),
    ({**MINIMAL, "authorization": {"access_rules": [{"role": "x", "actions": ["admin", "info"]}]}},
     "authorization.access_rules[0].actions: 'admin' must be alone in its rule"),
    ({**MINIMAL, "authorization": {"access_rules": [{"actions": ["info"]}]}},
     "authorization.access_rules[0].role: Field required"),
    (with_rules(RULE, {**RULE, "operator": "like"}),
     "authentication.jwk_config.jwt_configuration.role_rules[1].operator: Input should be"),
    (with_rules({**RULE, "jsonpath": "$.groups[["}),
     "authentication.jwk_config.jwt_configuration.role_rules[0].jsonpath: invalid JSONPath expression"),
    (with_rules({**RULE, "operator": "match", "value": "(unclosed"}),
     "authentication.jwk_config.jwt_configuration.role_rules[0].value: invalid regular expression"),
    (with_rules({**RULE, "operator": "match", "value": 3}),
     "authentication.jwk_config.jwt_configuration.role_rules[0].value: the match operator needs"),
    (with_rules({**RULE, "roles": []}),
     "authentication.jwk_config.jwt_configuration.role_rules[0].roles: at least one role"),
    (with_rules({**RULE, "roles": ["a", "a"]}),
     "authentication.jwk_config.jwt_configuration.role_rules[0].roles: must be unique"),
    (with_rules({**RULE, "roles": ["*"]}),
     "authentication.jwk_config.jwt_configuration.role_rules[0].roles: '*' is everyone's role"),
])
def test_errors_name_the_key(data, expected):
    assert any(problem.startswith(expected) for problem in problems(data)), problems(data)


def test_key_errors_never_show_a_key():
    found = problems({**MINIMAL, "authentication": {"module": "api-key-token", "api_key_config": {
        "keys": [{"key": "very-secret-1", "user_id": "a"}, {"key": "very-secret-1", "user_id": "b"}]}}})
    assert not any("very-secret-1" in problem for problem in found)


def test_valid_blocks(tmp_path):
    key_file = tmp_path / "team-b.key"
    key_file.write_text("  team-b-secret\n")
    staff = {"jsonpath": "$.email", "operator": "match", "value": "@example\\.com$", "roles": ["staff"],
             "negate": True}
    config = parse_config({
        **MINIMAL,
        "authentication": {"module": "api-key-token",
                           "api_key_config": {"keys": [{"key": "team-a-secret", "user_id": "a", "roles": ["chat"]},
                                                       {"key_file": str(key_file), "user_id": "b"}]},
                           "jwk_config": {"jwt_configuration": {"role_rules": [RULE, staff]}}},
        "authorization": {"access_rules": [{"role": "*", "actions": ["info"]}, {"role": "root", "actions": ["admin"]}]},
    })
    keys = config.authentication.api_key_config.keys
    assert keys[1].key.get_secret_value() == "team-b-secret"
    assert "team-a-secret" not in repr(config)  # keys are SecretStr
    assert [rule.roles for rule in config.role_rules] == [["admin"], ["staff"]] and config.role_rules[1].negate
    assert config.warnings() == []  # role_rules are used, whatever the module
    assert config.access_rules[1].actions == [Action.ADMIN]
    assert parse_config(MINIMAL).access_rules == [] and parse_config(MINIMAL).role_rules == []
    assert parse_config({**MINIMAL, "authorization": None}).access_rules == []
