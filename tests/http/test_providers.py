"""LCORE's grouping of the upstream's providers (its `group_providers`).
(The endpoints through `gateway serve`: tests/e2e/test_providers_and_config.py and
tests/e2e_llama_stack/test_providers.py.)"""

from __future__ import annotations

from gateway.http.providers import grouped


def test_grouped_by_api_with_only_id_and_type_in_the_upstreams_order():
    providers = [
        {"api": "inference", "provider_id": "vllm", "provider_type": "remote::vllm", "config": {"url": "x"},
         "health": {"status": "OK"}},
        {"api": "tool_runtime", "provider_id": "mcp", "provider_type": "remote::model-context-protocol"},
        {"api": "inference", "provider_id": "openai", "provider_type": "remote::openai"},
        "junk", {"provider_id": "no api"},
    ]
    assert grouped(providers) == {
        "inference": [{"provider_id": "vllm", "provider_type": "remote::vllm"},
                      {"provider_id": "openai", "provider_type": "remote::openai"}],
        "tool_runtime": [{"provider_id": "mcp", "provider_type": "remote::model-context-protocol"}]}
    assert grouped([]) == {}
