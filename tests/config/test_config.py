"""Configuration: LCORE keys, strictness with key paths, env substitution, warnings."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

from gateway.config import ConfigError, Configuration, load_config, parse_config, substitute_env
from gateway.config.base import Strict, is_not_built

MINIMAL = {"name": "x", "llama_stack": {"url": "http://upstream:8321"}}
EXAMPLE = Path(__file__).parents[2] / "config.example.yaml"


def problems(data) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return caught.value.problems


def test_minimal_defaults():
    config = parse_config(MINIMAL)
    assert config.service.port == 8080 and config.authentication.module == "noop"
    assert config.database.sqlite_path == "/tmp/lightspeed-stack.db"
    assert config.inference.max_infer_iters == 10 and config.inference.max_tool_calls == 30
    assert config.llama_stack.api == "auto" and config.llama_stack.conversations == "auto"
    assert config.warnings() == []


def test_lcore_file_with_unbuilt_features_starts_with_warnings():
    config = parse_config({**MINIMAL, "compaction": {"enabled": False},
                           "customization": {"system_prompt": "hi", "profile_path": "/p.py"},
                           "llama_stack": {"url": "http://u", "use_as_library_client": False,
                                           "allow_degraded_mode": True}})
    assert sorted(w.split(":")[0] for w in config.warnings()) == ["compaction", "customization.profile_path"]


def test_service_base_url_is_lcores_accepted_and_reported_as_not_built():
    # LCORE's key: an existing file with it starts, and start-up says nothing reads it.
    config = parse_config({**MINIMAL, "service": {"base_url": "https://gateway.example"}})
    assert config.warnings() == ["service.base_url: accepted but not implemented by this version (ignored)"]


def _marked_not_built(model: type[BaseModel], prefix: str = "") -> set[str]:
    """The keys of every field marked `not_built()`, in the model and the models it nests."""
    found = set()
    for name, field in model.model_fields.items():
        if is_not_built(field):
            found.add(prefix + name)
        types, seen = [field.annotation], []
        while types:   # through unions, lists and dicts to the models they hold
            kind = types.pop()
            types += get_args(kind)
            seen.append(kind)
        for kind in seen:
            if isinstance(kind, type) and issubclass(kind, Strict):
                found |= _marked_not_built(kind, f"{prefix}{name}.")
    return found


def test_config_example_lists_exactly_the_keys_marked_not_built():
    header = EXAMPLE.read_text().split("logged as warnings:", 1)[1].split(").", 1)[0]
    listed = {key.strip(" #\n") for key in header.replace("(and", ",").split(",")}
    assert listed == _marked_not_built(Configuration)


def test_customization_system_prompt_defaults_and_file(tmp_path):
    assert parse_config(MINIMAL).customization.default_system_prompt == "You are a helpful assistant"
    assert parse_config({**MINIMAL, "customization": None}).customization.default_system_prompt == \
        "You are a helpful assistant"
    assert parse_config({**MINIMAL, "customization": {"system_prompt": ""}}).customization.default_system_prompt == ""
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("From the file.\n")
    # As LCORE: the file wins over `system_prompt`.
    config = parse_config({**MINIMAL, "customization": {"system_prompt": "inline", "system_prompt_path": str(prompt)}})
    assert config.customization.default_system_prompt == "From the file.\n"
    assert config.customization.topic_summaries and "topic summarizer" in config.customization.topic_summary_prompt
    with pytest.raises(ConfigError, match=r"customization.system_prompt_path: cannot read .*missing.txt"):
        parse_config({**MINIMAL, "customization": {"system_prompt_path": str(tmp_path / "missing.txt")}})


PG = {"db": "d", "user": "u", "password": "s3cret-pw"}


def test_postgres_keys_are_lcores_with_its_defaults():
    config = parse_config({**MINIMAL, "database": {"postgres": {**PG, "namespace": "lightspeed-stack"}}})
    postgres = config.database.postgres
    assert (postgres.host, postgres.port, postgres.namespace, postgres.ssl_mode, postgres.gss_encmode) == \
        ("localhost", 5432, "lightspeed-stack", "prefer", "prefer")
    assert "s3cret-pw" not in repr(postgres) and postgres.password.get_secret_value() == "s3cret-pw"


@pytest.mark.parametrize("data, expected", [
    ({**MINIMAL, "bogus": 1}, "bogus: unknown key"),
    ({**MINIMAL, "service": {"prot": 1}}, "service.prot: unknown key"),
    ({**MINIMAL, "mcp_servers": [{"name": "a", "url": "http://a", "extra": 1}]}, "mcp_servers[0].extra: unknown key"),
    ({**MINIMAL, "mcp_servers": [{"name": "a", "url": "a"}]}, "mcp_servers[0].url: must be an http"),
    ({**MINIMAL, "byok_rag": [{"rag_id": "a", "vector_db_id": "vs_a", "search_url": "vectors:8321"}]},
     "byok_rag[0].search_url: must be an http"),
    ({**MINIMAL, "byok_rag": [{"rag_id": "a", "vector_db_id": "vs_a", "search_timeout": 0}]},
     "byok_rag[0].search_timeout"),
    ({**MINIMAL, "byok_rag": [{"rag_id": "a", "vector_db_id": "vs_a", "search_api_key": "k"}]},
     "search_api_key needs search_url"),
    ({**MINIMAL, "mcp_servers": [{"name": "a", "url": "http://a"}, {"name": "a", "url": "http://b"}]},
     "names must be unique"),
    ({**MINIMAL, "authentication": {"module": "k8s"}},
     "authentication.k8s_cluster_api: required by module k8s outside a cluster"),
    ({**MINIMAL, "authentication": {"module": "magic"}}, "authentication.module: unknown module"),
    ({**MINIMAL, "database": {"postgres": {"host": "db"}}}, "database.postgres.db: Field required"),
    ({**MINIMAL, "database": {"postgres": {**PG, "gss_encmode": "require"}}},
     "database.postgres.gss_encmode: 'require' is not supported"),
    ({**MINIMAL, "database": {"postgres": {**PG, "ssl_mode": "sometimes"}}}, "database.postgres.ssl_mode:"),
    ({**MINIMAL, "database": {"postgres": {**PG, "port": 70000}}}, "database.postgres.port:"),
    ({**MINIMAL, "database": {"postgres": {**PG, "ca_cert_path": "/nonexistent/ca.pem"}}},
     "database.postgres.ca_cert_path: no such file"),
    ({**MINIMAL, "database": {"postgres": PG, "sqlite": {}}}, "exactly one of sqlite and postgres"),
    ({**MINIMAL, "inference": {"default_model": "m"}}, "default_provider and default_model must be set together"),
    ({**MINIMAL, "service": {"root_path": "/x/"}}, "service.root_path: must start"),
    ({**MINIMAL, "llama_stack": {"url": "http://u", "api": "grpc"}}, "llama_stack.api:"),
    ({"name": "x"}, "llama_stack: Field required"),
    ([1], "must be a mapping"),
])
def test_errors_name_the_key(data, expected):
    assert any(expected in problem for problem in problems(data)), problems(data)


def test_env_substitution():
    env = {"URL": "http://from-env", "PORT": "9000"}
    data = substitute_env({"a": "${env.URL}/v1", "b": ["${env.PORT}", "${env.MISSING:=fallback}", "${env.E:=}"],
                           "c": 3}, environ=env)
    assert data == {"a": "http://from-env/v1", "b": ["9000", "fallback", ""], "c": 3}
    with pytest.raises(ConfigError) as caught:
        substitute_env({"llama_stack": {"url": "${env.NOPE}"}}, environ={})
    assert caught.value.problems == ["llama_stack.url: environment variable NOPE is not set and has no default"]


def test_env_values_are_coerced_like_yaml_values(monkeypatch):
    monkeypatch.setenv("GW_PORT", "9123")
    config = parse_config({**MINIMAL, "service": {"port": "${env.GW_PORT}"}})
    assert config.service.port == 9123


def test_default_model_id_and_mcp_approval_filter():
    config = parse_config({**MINIMAL, "inference": {"default_provider": "p", "default_model": "m"},
                           "mcp_servers": [{"name": "a", "url": "http://a",
                                            "require_approval": {"always": ["rm"], "never": []}}]})
    assert config.inference.default_model_id == "p/m"
    assert config.mcp_servers[0].require_approval.always == ["rm"]


def test_example_config_is_valid(monkeypatch):
    monkeypatch.setenv("LLAMA_STACK_URL", "http://localhost:8321")
    config = load_config(EXAMPLE)
    assert config.name and config.mcp_servers and config.byok_rag


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")


LIMITER = {"name": "daily", "type": "user_limiter", "initial_quota": 1000, "quota_increase": 100, "period": "1 day"}


def test_quota_handlers_without_storage_warn_and_are_not_enforced():
    config = parse_config({**MINIMAL, "quota_handlers": {"limiters": [LIMITER], "scheduler": {"period": 5}}})
    assert not config.quota_handlers.enforced
    assert config.warnings() == ["quota_handlers: limiters are configured without sqlite or postgres storage; "
                                 "as in LCORE they are not enforced"]
    enforced = parse_config({**MINIMAL, "quota_handlers": {"sqlite": {"db_path": "/tmp/q.db"}, "limiters": [LIMITER],
                                                           "enable_token_history": True}})
    assert enforced.quota_handlers.enforced and enforced.warnings() == []


@pytest.mark.parametrize("quota, expected", [
    ({"limiters": [{**LIMITER, "period": "1 fortnight"}]},
     "quota_handlers.limiters[0].period: '1 fortnight' is not a period: write a whole number and one unit"),
    ({"limiters": [{**LIMITER, "period": "0 days"}]}, "quota_handlers.limiters[0].period: '0 days': a period must"),
    ({"limiters": [{**LIMITER, "initial_quota": -1}]}, "quota_handlers.limiters[0].initial_quota: Input should be"),
    ({"limiters": [{**LIMITER, "type": "team_limiter"}]}, "quota_handlers.limiters[0].type: Input should be"),
    ({"limiters": [LIMITER, {**LIMITER, "type": "cluster_limiter"}]},
     "quota_handlers.limiters[1].name: 'daily' is used by another limiter"),
    ({"limiters": [{**LIMITER, "replenish": "double"}]}, "quota_handlers.limiters[0].replenish: Input should be"),
    ({"limiters": [{**LIMITER, "cap": 5}]}, "quota_handlers.limiters[0].cap: unknown key"),
    ({"sqlite": {"db_path": "/tmp/a"}, "postgres": PG}, "quota_handlers: configure at most one of sqlite and postgres"),
])
def test_quota_handlers_errors_name_the_key(quota, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config({**MINIMAL, "quota_handlers": quota})
    assert caught.value.problems[0].startswith(expected), caught.value.problems


def test_observability_otel_is_accepted_and_ignored_and_trace_content_is_ours():
    config = parse_config({**MINIMAL, "observability": {"otel": {"endpoint": "http://collector:4318"}}})
    assert [w.split(":")[0] for w in config.warnings()] == ["observability.otel"]
    assert config.observability.trace_content is False and config.service.access_log_format == "text"
    assert parse_config({**MINIMAL, "observability": None}).warnings() == []
    on = parse_config({**MINIMAL, "observability": {"trace_content": True}, "service": {"access_log_format": "json"}})
    assert on.observability.trace_content and on.service.access_log_format == "json"
    assert problems({**MINIMAL, "service": {"access_log_format": "xml"}})[0].startswith("service.access_log_format")
    assert problems({**MINIMAL, "observability": {"traces": True}})[0].startswith("observability.traces")
