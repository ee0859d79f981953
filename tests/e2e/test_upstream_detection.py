"""What the gateway learns about its upstream, and how it authenticates to it."""

from __future__ import annotations

import pytest



@pytest.fixture
def chat_only(upstream_with):
    return upstream_with("--no-responses")


def test_upstream_without_responses_api_gets_the_local_engine(gateway_factory, chat_only):
    gateway = gateway_factory(chat_only.url)
    chat_only.clear()
    reply = gateway.post("/v1/responses", {"input": "hi"})
    assert reply.ok()["output_text"] == "Scripted reply (turn 1, 1 messages): hi"
    # The probe, then the turn over Chat Completions.
    assert [r["path"] for r in chat_only.requests() if r["method"] == "POST"] == ["/v1/responses",
                                                                                   "/v1/chat/completions"]


def test_probe_happens_once(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    upstream.clear()  # the session's upstream has other gateways' probes
    for _ in range(3):
        assert gateway.post("/v1/responses", {"input": "hi"}).status == 200
    assert [r["method"] for r in upstream.requests("/v1/inspect/routes")] == ["GET"]  # the first turn's
    upstream.clear()
    assert gateway.post("/v1/responses", {"input": "hi again"}).status == 200
    assert upstream.requests("/v1/inspect/routes") == []


def test_api_key_sent_upstream(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0,
                                                         "api_key": "upstream-secret"})
    upstream.clear()
    assert gateway.post("/v1/responses", {"input": "with key"}).status == 200
    for request in upstream.requests():
        assert request["headers"].get("authorization") == "Bearer upstream-secret", request["path"]


def test_forced_responses_api_skips_nothing_it_needs(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "api": "responses"})
    upstream.clear()
    reply = gateway.post("/v1/responses", {"input": "forced"})
    assert reply.status == 200 and upstream.last()["body"]["max_infer_iters"] == 10
