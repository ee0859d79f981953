"""Every MCP request the gateway makes for a request carries that request's headers for
the server: the forwarded `headers` (`X-Tenant`) and the credentials
(`authorization_headers`) alike, on LCORE's OAuth probe and on the engine's sessions
(`initialize` as well as `tools/list` and `tools/call`), for every endpoint that talks
MCP, through `gateway serve` in forward and engine mode, against a real MCP server built
with the `mcp` package that records the headers of every request it gets."""

from __future__ import annotations

import json

import pytest

from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server

TENANT = {"X-Tenant": "acme"}
CLIENT_KEY = {"MCP-HEADERS": json.dumps({"calc": {"X-Api-Key": "client-key-7"}})}


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-turn-headers")


@pytest.fixture(scope="module")
def servers(mcp, tmp_path_factory):
    secret = tmp_path_factory.mktemp("turn-header-secrets") / "calc-token"
    secret.write_text("calc-s3cret\n")
    return [{"name": "calc", "url": mcp.url, "headers": ["X-Tenant"],
             "authorization_headers": {"Authorization": str(secret), "X-Api-Key": "client"}}]


@pytest.fixture(scope="module", params=["forward", "engine"])
def gateway(request, gateway_factory, upstream, chat_upstream, servers):
    if request.param == "forward":
        return gateway_factory(upstream.url, mcp_servers=servers)
    return gateway_factory(chat_upstream.url, mcp_servers=servers,
                           llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"})


def mcp_posts(mcp) -> list[tuple[str, dict[str, str]]]:
    """(JSON-RPC method, headers) of every MCP message the server was sent."""
    return [(json.loads(r["body"]).get("method"), r["headers"]) for r in recorded_requests(mcp)
            if r["method"] == "POST" and r["body"].startswith("{")]


def assert_every_request_carries_the_turns_headers(mcp, methods: set[str]) -> None:
    posts = mcp_posts(mcp)
    assert {method for method, _ in posts} >= methods, posts
    for method, headers in posts:
        assert headers.get("x-tenant") == "acme", (method, headers)
        assert headers.get("authorization") == "Bearer calc-s3cret", method
        assert headers.get("x-api-key") == "client-key-7", method


def test_a_turn_with_a_configured_server(gateway, mcp, request):
    clear_recorded_requests(mcp)
    body = gateway.post("/v1/responses", {"input": "Use the add tool with 2 and 3",
                                          "tools": [{"type": "mcp", "server_label": "calc"}]},
                        headers={**TENANT, **CLIENT_KEY}).ok()
    assert body["status"] == "completed"
    if "engine" in request.node.callspec.id:
        # The engine talks MCP itself: the probe's `initialize`, then a session to list
        # and one to call, each with its own `initialize`.
        assert [item["type"] for item in body["output"]] == ["mcp_list_tools", "mcp_call", "message"]
        assert body["output"][1]["output"] == "5"
        assert_every_request_carries_the_turns_headers(mcp, {"initialize", "notifications/initialized",
                                                             "tools/list", "tools/call"})
        assert [method for method, _ in mcp_posts(mcp)].count("initialize") == 3
    else:
        # The upstream talks MCP in forward mode: the gateway's own request is the probe.
        assert_every_request_carries_the_turns_headers(mcp, {"initialize"})


@pytest.mark.parametrize("path, body", [
    ("/v1/query", {"query": "hello"}),
    ("/v1/streaming_query", {"query": "hello"}),
    ("/v1/infer", {"question": "hello"}),
])
def test_the_other_turn_endpoints(gateway, mcp, path, body):
    clear_recorded_requests(mcp)
    reply = gateway.post(path, body, headers={**TENANT, **CLIENT_KEY})
    assert reply.status == 200, reply.body[:500]
    assert_every_request_carries_the_turns_headers(mcp, {"initialize"})


def test_the_tool_catalogue(gateway, mcp):
    clear_recorded_requests(mcp)
    listed = gateway.get("/v1/tools", headers={**TENANT, **CLIENT_KEY}).ok()
    assert [tool["identifier"] for tool in listed["tools"] if tool["toolgroup_id"] == "calc"] == ["add", "echo"]
    # The probe's `initialize`, then the listing session's.
    assert_every_request_carries_the_turns_headers(mcp, {"initialize", "tools/list"})
    assert [method for method, _ in mcp_posts(mcp)].count("initialize") == 2


def test_a_header_the_request_lacks_is_not_invented(gateway, mcp):
    clear_recorded_requests(mcp)
    gateway.get("/v1/tools", headers=CLIENT_KEY).ok()
    posts = mcp_posts(mcp)
    assert posts and all("x-tenant" not in headers for _, headers in posts)
    assert all(headers.get("authorization") == "Bearer calc-s3cret" for _, headers in posts)
