"""LCORE's MCP OAuth probe through `gateway serve`, in forward and engine mode: a
configured server whose `oauth` header the caller did not send is asked first; its 401
is the caller's 401 with the server's `WWW-Authenticate`, before anything is created
or sent upstream. As LCORE main, a server that gets an Authorization header from any
source (a file, `client`) is probed with it, and a refused one is the same 401. A real
loopback HTTP server plays the OAuth-protected MCP server, with LCORE's mock-mcp rule: a
bearer whose token contains `invalid` is refused."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.auth_peers import FakeKubeApi, TestCa

CHALLENGE = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'


class _Protected(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append({"authorization": self.headers.get("Authorization"), "body": self.rfile.read(length)})
        token = self.headers.get("Authorization") or ""
        if token.startswith("Bearer ") and "invalid" not in token:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")
            return
        self.send_response(401)
        self.send_header("WWW-Authenticate", CHALLENGE)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def protected():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Protected)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    server.shutdown()


@pytest.fixture(scope="module")
def oauth_server(protected):
    return {"name": "secure", "url": protected, "authorization_headers": {"Authorization": "oauth"}}


@pytest.fixture(scope="module", params=["forward", "engine"])
def gateway(request, gateway_factory, upstream, upstream_with, oauth_server):
    if request.param == "forward":
        return gateway_factory(upstream.url, mcp_servers=[oauth_server]), upstream
    chat = upstream_with("--no-responses")
    return gateway_factory(chat.url, llama_stack={"url": chat.url, "max_retries": 0, "api": "chat_completions"},
                           mcp_servers=[oauth_server]), chat


def test_a_missing_oauth_token_is_a_401_with_the_servers_challenge(gateway, protected):
    gw, upstream = gateway
    upstream.clear()
    _Protected.seen.clear()
    reply = gw.post("/v1/responses", {"input": "hello"})
    assert reply.status == 401 and reply.headers["www-authenticate"] == CHALLENGE
    assert reply.json()["detail"] == {"response": "Missing or invalid credentials provided by client",
                                      "cause": f"MCP server at {protected} requires OAuth"}
    assert [r["path"] for r in upstream.requests() if r["method"] != "GET"] == []
    assert len(_Protected.seen) == 1 and _Protected.seen[0]["authorization"] is None
    assert json.loads(_Protected.seen[0]["body"])["method"] == "initialize"


def test_no_probe_with_the_token_or_without_the_server(gateway):
    gw, _ = gateway
    _Protected.seen.clear()
    with_token = {"MCP-HEADERS": json.dumps({"secure": {"Authorization": "Bearer good"}})}
    assert gw.post("/v1/responses", {"input": "hello", "tool_choice": "none"}).status == 200
    assert gw.post("/v1/responses", {"input": "hello", "tools": []}).status == 200
    assert _Protected.seen == []
    # With the caller's token the server is used with it (the engine lists it), never probed.
    assert gw.post("/v1/responses", {"input": "hello"}, headers=with_token).status == 200
    assert all(seen["authorization"] == "Bearer good" for seen in _Protected.seen)


def test_lcores_query_endpoints_probe_too(gateway, protected):
    """LCORE's mcp.feature: `/v1/query` and `/v1/streaming_query` without the OAuth token
    are the same 401 with the server's challenge; `no_tools` sends no MCP server, so
    nothing is probed."""
    gw, upstream = gateway
    for path in ("/v1/query", "/v1/streaming_query"):
        upstream.clear()
        _Protected.seen.clear()
        reply = gw.post(path, {"query": "hello"})
        assert reply.status == 401 and reply.headers["www-authenticate"] == CHALLENGE, reply.body
        assert reply.json() == {"detail": {"response": "Missing or invalid credentials provided by client",
                                           "cause": f"MCP server at {protected} requires OAuth"}}
        assert [r["path"] for r in upstream.requests() if r["method"] != "GET"] == []
        assert len(_Protected.seen) == 1
        _Protected.seen.clear()
        assert gw.post(path, {"query": "hello", "no_tools": True}).status == 200
        assert _Protected.seen == []


def test_the_tool_list_probes_too(gateway, protected):
    """LCORE's mcp.feature: `GET /v1/tools` without the OAuth token is the same 401."""
    gw, _ = gateway
    _Protected.seen.clear()
    reply = gw.get("/v1/tools")
    assert reply.status == 401 and reply.headers["www-authenticate"] == CHALLENGE, reply.body
    assert reply.json()["detail"]["cause"] == f"MCP server at {protected} requires OAuth"
    assert len(_Protected.seen) == 1


@pytest.fixture(scope="module")
def credentialed(gateway_factory, upstream, protected, tmp_path_factory):
    files = tmp_path_factory.mktemp("mcp-secrets")
    (files / "good").write_text("Bearer file-token-ok\n")
    (files / "bad").write_text("Bearer invalid-file-token\n")

    def start(source: str):
        return gateway_factory(upstream.url, mcp_servers=[
            {"name": "filed", "url": protected, "authorization_headers": {"Authorization": source}}])

    return {"good": start(str(files / "good")), "bad": start(str(files / "bad")), "client": start("client")}


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"input": "hello"}),
    ("/v1/responses", {"input": "hello", "stream": True}),
    ("/v1/query", {"query": "hello"}),
    ("/v1/streaming_query", {"query": "hello"}),
])
def test_a_refused_header_from_any_source_is_the_401(credentialed, upstream, protected, path, body):
    upstream.clear()
    _Protected.seen.clear()
    reply = credentialed["bad"].post(path, body)
    assert reply.status == 401 and reply.headers["www-authenticate"] == CHALLENGE, reply.body
    assert reply.json()["detail"]["cause"] == f"MCP server at {protected} requires OAuth"
    assert _Protected.seen[0]["authorization"] == "Bearer invalid-file-token"
    assert [r["path"] for r in upstream.requests() if r["method"] != "GET"] == []
    # A client's token: invalid is refused, missing skips the server (LCORE: not probed,
    # not sent upstream), valid goes on.
    client = credentialed["client"]
    invalid = {"MCP-HEADERS": json.dumps({"filed": {"Authorization": "Bearer invalid-client"}})}
    assert client.post(path, body, headers=invalid).status == 401
    upstream.clear()
    _Protected.seen.clear()
    skipped = client.post(path, body)
    assert skipped.status == 200, skipped.body
    assert _Protected.seen == []
    sent = [r for r in upstream.requests() if r["method"] == "POST" and r["path"].endswith("/responses")]
    assert sent and all(protected not in json.dumps(r.get("body")) for r in sent)
    valid = {"MCP-HEADERS": json.dumps({"filed": {"Authorization": "Bearer client-ok"}})}
    assert client.post(path, body, headers=valid).status == 200


def test_an_accepted_header_goes_on_and_the_tool_list_probes(credentialed):
    _Protected.seen.clear()
    assert credentialed["good"].post("/v1/responses", {"input": "hello"}).status == 200
    assert _Protected.seen[0]["authorization"] == "Bearer file-token-ok"
    reply = credentialed["bad"].get("/v1/tools")
    assert reply.status == 401 and reply.headers["www-authenticate"] == CHALLENGE
    # The client's header omitted: the list goes on without the server, as LCORE's.
    _Protected.seen.clear()
    listed = credentialed["client"].get("/v1/tools").ok()
    assert {tool["toolgroup_id"] for tool in listed["tools"]} == {"builtin::file_search"}
    assert [server["name"] for server in listed["unavailable_servers"]] == ["filed"]
    assert _Protected.seen == []


@pytest.fixture(scope="module")
def kube_gateway(gateway_factory, upstream, protected, tmp_path_factory):
    api = FakeKubeApi(TestCa(tmp_path_factory.mktemp("ca")), users={
        "good-user-token": {"username": "good", "uid": "uid-good", "groups": ["system:authenticated"]},
        "invalid-user-token": {"username": "bad", "uid": "uid-bad", "groups": ["system:authenticated"]},
    }, allowed={"good", "bad"})
    token = tmp_path_factory.mktemp("sa") / "token"
    token.write_text("gateway-sa-token-2\n")
    gateway = gateway_factory(upstream.url, authentication={
        "module": "k8s", "k8s_cluster_api": api.url, "k8s_ca_cert_path": str(api.ca.ca_path),
        "k8s_token_path": str(token)},
        mcp_servers=[{"name": "kube", "url": protected, "authorization_headers": {"Authorization": "kubernetes"}}])
    yield gateway
    api.close()


def test_the_callers_kubernetes_token_refused_is_the_401(kube_gateway, protected):
    """LCORE's mcp.feature `kubernetes` mode: the caller's own token, passed on, refused."""
    _Protected.seen.clear()
    reply = kube_gateway.post("/v1/query", {"query": "hello"}, headers={"Authorization": "Bearer invalid-user-token"})
    assert reply.status == 401 and reply.headers["www-authenticate"] == CHALLENGE, reply.body
    assert reply.json()["detail"]["cause"] == f"MCP server at {protected} requires OAuth"
    assert _Protected.seen[0]["authorization"] == "Bearer invalid-user-token"
    ok = kube_gateway.post("/v1/query", {"query": "hello"}, headers={"Authorization": "Bearer good-user-token"})
    assert ok.status == 200, ok.body
