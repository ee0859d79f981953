"""LCORE's `GET /v1/providers`, `GET /v1/providers/{id}` and `GET /v1/config` through
`gateway serve` (issue 47), in front of the scripted upstream (which has no providers API)
and an unreachable one; the real Llama Stack's providers: tests/e2e_llama_stack/test_providers.py."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.processes import free_port

KEY = "providers-admin-key-0001"
AUTH = {"authentication": {"module": "api-key-token", "api_key_config": {"keys": [
    {"key": KEY, "user_id": "admin", "roles": ["ops"]},
    {"key": "providers-chat-key-0001", "user_id": "chat", "roles": ["chat"]}]}},
    "authorization": {"access_rules": [{"role": "ops", "actions": ["list_providers", "get_provider", "get_config"]},
                                       {"role": "chat", "actions": ["responses"]}]}}
ADMIN = {"Authorization": f"Bearer {KEY}"}
UNAVAILABLE = {"response": "Unable to connect to Llama Stack", "cause": "Connection error."}


@pytest.fixture(scope="module", params=["forward", "engine"])
def gateway(request, gateway_factory, upstream, chat_upstream):
    if request.param == "engine":
        return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url), **AUTH)
    return gateway_factory(upstream.url, **AUTH)


@pytest.fixture(scope="module")
def gone(gateway_factory):
    url = f"http://127.0.0.1:{free_port()}"   # nothing listens there
    return gateway_factory(url, llama_stack={"url": url, "max_retries": 0, "allow_degraded_mode": True,
                                             "circuit_breaker_failures": 0}, **AUTH)


def test_an_upstream_without_a_providers_api_is_a_501(gateway):
    for path in ("/v1/providers", "/v1/providers/scripted"):
        reply = gateway.get(path, headers=ADMIN)
        assert reply.status == 501, reply.body
        assert reply.json()["detail"] == {"response": "Not implemented",
                                          "cause": "The upstream has no providers API (GET /v1/providers)."}


def test_an_unreachable_upstream_is_lcores_503(gone):
    for path in ("/v1/providers", "/v1/providers/scripted"):
        reply = gone.get(path, headers=ADMIN)
        assert reply.status == 503 and reply.json()["detail"] == UNAVAILABLE


def test_unauthenticated_and_unauthorized(gateway):
    for path in ("/v1/providers", "/v1/providers/scripted", "/v1/config"):
        assert gateway.get(path).status == 401
        refused = gateway.get(path, headers={"Authorization": "Bearer providers-chat-key-0001"})
        assert refused.status == 403 and refused.json()["detail"]["response"] == \
            "User does not have permission to access this endpoint"


def test_the_configuration_with_every_secret_masked(gateway_factory, upstream, tmp_path):
    key_file = tmp_path / "team.key"
    key_file.write_text("team-key-from-a-file-0001")
    gateway = gateway_factory(upstream.url, **{
        **AUTH, "authentication": {"module": "api-key-token", "api_key_config": {
            "api_key": "lcore-default-key-0123456789", "keys": [
                {"key": KEY, "user_id": "admin", "roles": ["ops"]},
                {"key_file": str(key_file), "user_id": "team", "roles": ["chat"]}]}}},
        llama_stack={"url": upstream.url, "max_retries": 0, "api_key": "upstream-api-key-0123456789"},
        response_compaction={"keys": [{"id": "k1", "secret": "compaction-secret-0123456789abcdef0123"}]})
    reply = gateway.get("/v1/config", headers=ADMIN)
    assert reply.status == 200
    configuration = reply.json()["configuration"]
    assert configuration["name"] == "gateway under test"
    assert configuration["llama_stack"]["url"] == upstream.url
    assert configuration["llama_stack"]["api_key"] == "**********"
    assert configuration["authentication"]["api_key_config"]["api_key"] == "**********"
    assert configuration["response_compaction"]["keys"][0] == {"id": "k1", "secret": "**********"}
    text = json.dumps(configuration)
    leaked = [secret for secret in gateway.secrets() | {"team-key-from-a-file-0001"} if secret and secret in text]
    assert leaked == []
