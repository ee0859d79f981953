"""LCORE's `GET /v1/providers` and `GET /v1/providers/{id}` relayed from the real Llama
Stack (issue 47), in forward mode and with the local engine over Llama Stack's Chat
Completions: the list grouped by API as LCORE groups it, one provider's five fields, and
LCORE's 404 for a provider Llama Stack does not know (its 400)."""

from __future__ import annotations

import pytest

from tests.e2e_llama_stack.conftest import DEFAULT_MODEL


@pytest.fixture(scope="module", params=["forward", "engine"])
def gateway(request, gw, stack, gateway_factory):
    if request.param == "forward":
        return gw
    return gateway_factory(stack.url, llama_stack={"url": stack.url, "max_retries": 0, "api": "chat_completions"},
                           inference=DEFAULT_MODEL)


def test_the_list_grouped_by_api(gateway, stack):
    expected: dict[str, list[dict[str, str]]] = {}
    for provider in stack.get("/v1/providers")["data"]:
        expected.setdefault(provider["api"], []).append(
            {"provider_id": provider["provider_id"], "provider_type": provider["provider_type"]})
    reply = gateway.get("/v1/providers")
    assert reply.status == 200
    assert reply.json() == {"providers": expected}
    assert {"provider_id": "scripted", "provider_type": "remote::vllm"} in reply.json()["providers"]["inference"]


def test_one_provider_and_an_unknown_one(gateway, stack):
    own = stack.get("/v1/providers/scripted")
    reply = gateway.get("/v1/providers/scripted")
    assert reply.status == 200
    assert reply.json() == {name: own[name] for name in ("api", "config", "health", "provider_id", "provider_type")}
    missing = gateway.get("/v1/providers/nope")
    assert missing.status == 404
    assert missing.json()["detail"] == {"response": "Provider not found", "cause": "Provider with ID nope does not exist"}
