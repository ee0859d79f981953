"""Configured tools injected into turns (MCP servers with their headers, RAG stores),
defaults from `inference`, LCORE extensions, and the noop-with-token module."""

from __future__ import annotations

import json

import pytest

from tests.support.gateway_db import Counts, GatewayDb
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK

MCP_URL = "http://127.0.0.1:9/mcp"


@pytest.fixture(scope="module")
def tooled(gateway_factory, upstream, tmp_path_factory):
    secret = tmp_path_factory.mktemp("secrets") / "calc-token"
    secret.write_text("s3cret-from-file\n")
    return gateway_factory(
        upstream.url,
        authentication={"module": "noop-with-token"},
        inference={"max_infer_iters": 4, "max_tool_calls": 7},
        mcp_servers=[
            {"name": "calc", "url": MCP_URL, "authorization_headers": {"Authorization": str(secret)},
             "headers": ["X-Tenant"]},
            {"name": "kube", "url": "http://127.0.0.1:9/kube", "authorization_headers": {"Authorization": "kubernetes"},
             "require_approval": "always"},
            {"name": "byclient", "url": "http://127.0.0.1:9/client",
             "authorization_headers": {"X-Api-Key": "client"}},
        ],
        byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"},
                  {"rag_id": "faq", "vector_db_id": "vs_faq"}],
        client_tools=CLIENT_MCP_ON_LOOPBACK)


AUTH = {"Authorization": "Bearer user-token-1"}


def sent(tooled, upstream, body: dict, headers: dict[str, str]) -> dict:
    """POST a turn that must succeed; return the body the upstream received for it."""
    upstream.clear()
    tooled.post("/v1/responses", body, headers=headers).ok()
    return upstream.last()["body"]


def assert_left_nothing(tooled, upstream, user_id: str) -> None:
    """A refused request sent nothing upstream and recorded nothing in the gateway."""
    assert [r["path"] for r in upstream.requests() if r["method"] != "GET"] == []
    db = GatewayDb.of(tooled)
    db.flush(headers=AUTH)
    assert db.counts(user_id=user_id) == Counts(conversations=0, turns=0)


def test_all_configured_tools_when_tools_omitted(tooled, upstream):
    body = sent(tooled, upstream, {"input": "hello"}, {**AUTH, "X-Tenant": "acme"})
    tools = {tool.get("server_label", tool["type"]): tool for tool in body["tools"]}
    assert tools["file_search"] == {"type": "file_search", "vector_store_ids": ["vs_handbook", "vs_faq"]}
    # Llama Stack takes the bearer credential in `authorization` (bare), never in headers.
    assert tools["calc"] == {"type": "mcp", "server_label": "calc", "server_url": MCP_URL, "require_approval": "never",
                             "headers": {"X-Tenant": "acme"}, "authorization": "s3cret-from-file"}
    assert tools["kube"]["authorization"] == "user-token-1" and "headers" not in tools["kube"]
    assert tools["kube"]["require_approval"] == "always"
    # `client` headers come from MCP-HEADERS; without them the server is skipped.
    assert "byclient" not in tools
    assert body["max_infer_iters"] == 4 and body["max_tool_calls"] == 7


def test_client_mcp_headers(tooled, upstream):
    headers = {**AUTH, "MCP-HEADERS": json.dumps({"byclient": {"X-Api-Key": "k-123"}})}
    tools = {tool.get("server_label"): tool for tool in sent(tooled, upstream, {"input": "hello"}, headers)["tools"]}
    assert tools["byclient"]["headers"] == {"X-Api-Key": "k-123"}
    upstream.clear()
    reply = tooled.post("/v1/responses?user_id=bad-mcp-headers", {"input": "hello"},
                        headers={**AUTH, "MCP-HEADERS": "not json"})
    assert reply.status == 422 and reply.json()["error"]["param"] == "MCP-HEADERS"
    assert_left_nothing(tooled, upstream, "bad-mcp-headers")


def test_tool_choice_none_sends_no_tools(tooled, upstream):
    body = sent(tooled, upstream, {"input": "plain", "tool_choice": "none"}, AUTH)
    assert "tools" not in body and "tool_choice" not in body


def test_explicit_tools_used_as_given_with_configured_headers(tooled, upstream):
    tools = [{"type": "mcp", "server_label": "calc"}, {"type": "file_search", "vector_store_ids": ["faq", "vs_handbook"]},
             {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]
    body = sent(tooled, upstream, {"input": "explicit", "tools": tools, "max_infer_iters": 2, "max_tool_calls": 1},
                AUTH)
    assert body["tools"][0] == {"type": "mcp", "server_label": "calc", "server_url": MCP_URL,
                                "require_approval": "never", "authorization": "s3cret-from-file"}
    assert body["tools"][1]["vector_store_ids"] == ["vs_faq", "vs_handbook"]  # rag_id -> vector store id
    assert body["tools"][2]["name"] == "f"
    assert body["max_infer_iters"] == 2 and body["max_tool_calls"] == 1  # the client's values win


def test_client_authorization_header_moved_for_unconfigured_server(tooled, upstream):
    tools = [{"type": "mcp", "server_label": "own", "server_url": "http://127.0.0.1:9/own",
              "headers": {"authorization": "Bearer client-tok", "X-Trace": "1"}}]
    body = sent(tooled, upstream, {"input": "own server", "tools": tools}, AUTH)
    assert body["tools"][0] == {"type": "mcp", "server_label": "own", "server_url": "http://127.0.0.1:9/own",
                                "headers": {"X-Trace": "1"}, "authorization": "client-tok"}


def test_lcore_extensions_not_forwarded(tooled, upstream):
    upstream.clear()
    tooled.post("/v1/responses", {"input": "solr please", "generate_topic_summary": True,
                                  "solr": {"mode": "hybrid", "filters": {"fq": ["product:x"]}}}, headers=AUTH).ok()
    request = upstream.last()
    assert "solr" not in request["body"] and "generate_topic_summary" not in request["body"]
    provider_data = {k.lower(): v for k, v in request["headers"].items()}["x-llamastack-provider-data"]
    assert json.loads(provider_data) == {"solr": {"mode": "hybrid", "filters": {"fq": ["product:x"]}}}


@pytest.mark.parametrize("headers, cause, code", [
    ({}, "No Authorization header found", "missing_credentials"),
    ({"Authorization": "Basic abc"}, "No token found in Authorization header", "invalid_credentials"),
    ({"Authorization": "Bearer "}, "No token found in Authorization header", "invalid_credentials"),
])
def test_noop_with_token_requires_bearer(tooled, upstream, headers, cause, code):
    upstream.clear()
    for method, path in (("POST", "/v1/responses"), ("GET", "/v1/models"), ("GET", "/v1/info")):
        reply = tooled.request(method, path + "?user_id=no-bearer", {"input": "x"} if method == "POST" else None,
                               headers=headers)
        assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"
        data = reply.json()
        assert data["detail"] == {"response": "Missing or invalid credentials provided by client", "cause": cause}
        if path == "/v1/info":
            assert set(data) == {"detail"}  # an endpoint only LCORE clients call: LCORE's body
        else:
            assert data["error"]["type"] == "authentication_error" and data["error"]["code"] == code
    assert upstream.requests() == []
    assert_left_nothing(tooled, upstream, "no-bearer")
    # Probes authenticate like every endpoint unless skip_for_health_probes is set (LCORE).
    assert tooled.get("/liveness", headers=headers).status == 401


def test_start_up_warns_that_callers_choose_their_user_id(tooled):
    assert "noop-with-token lets every caller choose its own user id" in tooled.log()


def test_openai_sdk_sends_its_key_as_bearer(tooled):
    response = tooled.client(api_key="sdk-token").responses.create(input="sdk", tool_choice="none")
    assert response.status == "completed"
