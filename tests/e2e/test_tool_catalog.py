"""LCORE's `GET /v1/tools` and `GET /v1/mcp-auth/client-options` through `gateway serve`
(issue 21): the built-in file-search catalogue alone without MCP servers (LCORE's 503 with the
upstream unreachable), each
configured server's tools listed from a real MCP server (the `mcp` package) with the
headers the request resolves, a server whose header cannot be resolved (or that cannot
be reached) reported in `unavailable_servers`, and the servers that want client headers."""

from __future__ import annotations

import json

import pytest

from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server
from tests.support.processes import free_port

BUILTIN = [
    {"identifier": "insert_into_memory", "description": "Insert documents into memory", "parameters": [],
     "provider_id": "file-search", "toolgroup_id": "builtin::file_search", "server_source": "builtin",
     "type": "tool"},
    {"identifier": "file_search", "description": "Search for information in a database.",
     "parameters": [{"name": "query", "description": "The query to search for. Can be a natural language sentence "
                     "or keywords.", "parameter_type": "string", "required": True, "default": None}],
     "provider_id": "file-search", "toolgroup_id": "builtin::file_search", "server_source": "builtin",
     "type": "tool"},
]


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-catalog")


@pytest.fixture(scope="module")
def catalog(gateway_factory, upstream, mcp):
    return gateway_factory(upstream.url, mcp_servers=[
        {"name": "calc", "url": mcp.url},
        {"name": "github-api", "url": mcp.url, "authorization_headers": {"Authorization": "client"}},
        {"name": "gitlab-api", "url": mcp.url, "authorization_headers": {"X-API-Token": "client"}},
        {"name": "gone", "url": f"http://127.0.0.1:{free_port()}/mcp", "timeout": 5},
    ])


def test_without_mcp_servers_only_the_builtin_catalogue(gateway_factory, upstream):
    plain = gateway_factory(upstream.url)
    assert plain.get("/v1/tools").ok() == {"tools": BUILTIN}
    assert plain.get("/v1/mcp-auth/client-options").ok() == {"servers": []}


def test_configured_servers_tools_and_the_ones_skipped(catalog, mcp):
    body = catalog.get("/v1/tools").ok()
    assert body["tools"][:2] == BUILTIN
    calc = [tool for tool in body["tools"] if tool["toolgroup_id"] == "calc"]
    assert [tool["identifier"] for tool in calc] == ["add", "echo"]
    add = calc[0]
    assert add["description"] == "Add two integers." and add["provider_id"] == "model-context-protocol"
    assert add["server_source"] == mcp.url and add["type"] == "tool"
    assert [(p["name"], p["parameter_type"], p["required"]) for p in add["parameters"]] == [
        ("a", "integer", True), ("b", "integer", True)]
    unavailable = {entry["name"]: entry["reason"] for entry in body["unavailable_servers"]}
    assert unavailable["github-api"] == "skipped: header Authorization (from client) could not be resolved"
    assert unavailable["gitlab-api"] == "skipped: header X-API-Token (from client) could not be resolved"
    assert unavailable["gone"].startswith("listing failed")
    assert "github-api" in catalog.log()   # and logged


def test_client_headers_let_their_servers_in(catalog, mcp):
    clear_recorded_requests(mcp)
    headers = {"MCP-HEADERS": json.dumps({"github-api": {"Authorization": "Bearer gh-token-1"},
                                          "gitlab-api": {"X-API-Token": "gl-token-1"}})}
    body = catalog.get("/v1/tools", headers=headers).ok()
    groups = [tool["toolgroup_id"] for tool in body["tools"][2:]]
    assert groups == ["calc", "calc", "github-api", "github-api", "gitlab-api", "gitlab-api"]
    assert [entry["name"] for entry in body["unavailable_servers"]] == ["gone"]
    seen = [request["headers"] for request in recorded_requests(mcp)]
    assert any(h.get("authorization") == "Bearer gh-token-1" for h in seen)
    assert any(h.get("x-api-token") == "gl-token-1" for h in seen)


def test_client_options(catalog):
    assert catalog.get("/v1/mcp-auth/client-options").ok() == {"servers": [
        {"name": "github-api", "client_auth_headers": ["Authorization"]},
        {"name": "gitlab-api", "client_auth_headers": ["X-API-Token"]}]}


def test_bad_mcp_headers_are_a_422(catalog):
    reply = catalog.get("/v1/tools", headers={"MCP-HEADERS": "not json"})
    assert reply.status == 422 and reply.json()["detail"]["cause"] == "MCP-HEADERS must be a JSON object of objects"


def test_the_upstream_is_asked_and_unreachable_is_lcores_503(gateway_factory, upstream):
    # LCORE lists Llama Stack's providers before the built-in tools: the upstream is asked.
    plain = gateway_factory(upstream.url)
    upstream.clear()
    assert plain.get("/v1/tools").ok() == {"tools": BUILTIN}
    assert [(r["method"], r["path"]) for r in upstream.requests()] == [("GET", "/v1/providers")]
    # Unreachable: LCORE's 503 with the configured name, not the built-in tools.
    dead = gateway_factory(f"http://127.0.0.1:{free_port()}", service={"error_body": "lcore"},
                           llama_stack={"url": f"http://127.0.0.1:{free_port()}", "max_retries": 0,
                                        "display_name": "OGX"})
    reply = dead.get("/v1/tools")
    assert reply.status == 503
    assert reply.json() == {"detail": {"response": "Unable to connect to OGX", "cause": "Connection error."}}
    assert dead.get("/v1/mcp-auth/client-options").ok() == {"servers": []}
