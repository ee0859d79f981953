"""Clients' own MCP servers (`client_tools.allow_unconfigured_mcp_servers`) through
`gateway serve`: refused unless allowed, and then never on a loopback, private,
link-local or metadata address unless the operator allow-lists it (no SSRF through
the gateway). Engine mode judges the address it connects to; forward mode resolves
the name before the upstream connects. The MCP server is the real one of
tests/support/mcp_server.py, on 127.0.0.1."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.support.flows import checked, kinds
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server

CHAT = "/v1/chat/completions"
ALLOWED = {"allow_unconfigured_mcp_servers": True}


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-client-servers")


@pytest.fixture(scope="module")
def sse(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-client-servers-sse", sse=True)


@pytest.fixture(scope="module")
def redirector(mcp):
    """Answers every request with a 307 to the MCP server's own 127.0.0.1 URL."""
    hits: list[str] = []

    class Redirect(BaseHTTPRequestHandler):
        def _redirect(self) -> None:
            hits.append(self.command)
            self.send_response(307)
            self.send_header("Location", mcp.url)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_DELETE = _redirect

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.hits = hits
    yield server
    server.shutdown()
    server.server_close()


def engine_gateway(gateway_factory, chat_upstream, client_tools):
    return gateway_factory(chat_upstream.url, client_tools=client_tools,
                           llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"})


@pytest.fixture(scope="module")
def strict(gateway_factory, chat_upstream):
    """Clients' servers allowed, no exceptions to the address rules."""
    return engine_gateway(gateway_factory, chat_upstream, ALLOWED)


@pytest.fixture(scope="module")
def trusting(gateway_factory, chat_upstream):
    """Clients' servers allowed, and `localhost` allow-listed by name."""
    return engine_gateway(gateway_factory, chat_upstream, {**ALLOWED, "allowed_mcp_destinations": ["localhost"]})


def own(url: str, label: str = "mine") -> dict:
    return {"type": "mcp", "server_label": label, "server_url": url}


def on_localhost(url: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"localhost:{parts.port}").geturl()


def stream(gateway, body):
    status, frames = gateway.stream(body)
    assert status == 200, frames
    return checked(frames)


def test_not_allowed_by_default(gateway_factory, chat_upstream, upstream, mcp):
    """Neither mode takes a client's server unless the config says so (422, nothing sent)."""
    for gateway, peer in ((engine_gateway(gateway_factory, chat_upstream, {}), chat_upstream),
                          (gateway_factory(upstream.url), upstream)):
        peer.clear()
        reply = gateway.post("/v1/responses", {"input": "hi", "tools": [own("https://mcp.example.com/mcp")]})
        assert reply.status == 422, reply.body
        error = reply.json()["error"]
        assert error["param"] == "tools" and error["code"] == "mcp_server_not_allowed"
        assert "'mine' is not configured" in error["message"]
        assert [r for r in peer.requests() if r["method"] == "POST"] == []


@pytest.mark.parametrize("url, kind", [
    ("http://127.0.0.1:{port}/mcp", "loopback"), ("http://[::1]:{port}/mcp", "loopback"),
    ("http://[::ffff:127.0.0.1]:{port}/mcp", "loopback"), ("http://169.254.169.254/latest/meta-data", "metadata"),
    ("http://10.0.0.7/mcp", "private"), ("http://100.64.0.1/mcp", "CGNAT"),
])
def test_a_literally_forbidden_url_is_a_422_before_anything(strict, chat_upstream, mcp, url, kind):
    chat_upstream.clear()
    clear_recorded_requests(mcp)
    reply = strict.post("/v1/responses", {"input": "hi", "tools": [own(url.format(port=urlsplit(mcp.url).port))]})
    assert reply.status == 422, reply.body
    error = reply.json()["error"]
    assert error["code"] == "mcp_server_forbidden" and error["param"] == "tools"
    assert f"is not allowed: it is a {kind} address" in error["message"]
    assert chat_upstream.requests(CHAT) == [] and recorded_requests(mcp) == []


def test_a_name_resolving_to_loopback_is_refused_at_connect_time(strict, mcp):
    clear_recorded_requests(mcp)
    events = stream(strict, {"input": "Use the add tool with 2 and 3", "tools": [own(on_localhost(mcp.url))]})
    assert kinds(events)[2:6] == ["output_item.added", "mcp_list_tools.in_progress", "mcp_list_tools.failed",
                                  "output_item.done"]
    listing, message = events[-1]["response"]["output"]
    assert listing["type"] == "mcp_list_tools" and listing["tools"] == []
    assert listing["error"] == "MCP server host 'localhost' is not allowed: it is a loopback address"
    assert message["type"] == "message" and events[-1]["type"] == "response.completed"
    assert recorded_requests(mcp) == []  # not one byte reached it


def test_the_allow_list_lets_the_server_in(trusting, chat_upstream, mcp):
    clear_recorded_requests(mcp)
    events = stream(trusting, {"input": "Use the add tool with 2 and 3", "tools": [own(on_localhost(mcp.url))]})
    listing, call, message = events[-1]["response"]["output"]
    assert listing["error"] is None and [tool["name"] for tool in listing["tools"]] == ["add", "echo"]
    assert call["type"] == "mcp_call" and call["server_label"] == "mine" and call["output"] == "5"
    assert message["content"][0]["text"] == "Tool said: 5"
    assert any('"tools/call"' in r["body"] for r in recorded_requests(mcp))
    # The echo keeps the client's own URL (it is the client's, not a secret).
    assert events[-1]["response"]["tools"][0]["server_url"] == on_localhost(mcp.url)


def test_the_sse_transport_is_checked_alike(strict, trusting, sse):
    clear_recorded_requests(sse)
    body = {"input": "Use the add tool with 2 and 3", "tools": [own(on_localhost(sse.url))]}
    listing = stream(strict, body)[-1]["response"]["output"][0]
    assert listing["error"] == "MCP server host 'localhost' is not allowed: it is a loopback address"
    assert recorded_requests(sse) == []
    listing, call, _ = stream(trusting, body)[-1]["response"]["output"]
    assert listing["error"] is None and call["output"] == "5"
    assert any(r["path"] == "/sse" for r in recorded_requests(sse))


def test_a_redirect_to_a_forbidden_address_is_refused(trusting, redirector, mcp):
    """`localhost` is allowed by name; the redirect names 127.0.0.1, which is not."""
    clear_recorded_requests(mcp)
    url = f"http://localhost:{redirector.server_address[1]}/mcp"
    events = stream(trusting, {"input": "Use the add tool with 2 and 3", "tools": [own(url)]})
    listing = events[-1]["response"]["output"][0]
    assert listing["type"] == "mcp_list_tools" and listing["tools"] == []
    # The `mcp` transports follow no redirect off the server's origin; one that stays on
    # it reconnects through the same address check (tests/engine/test_mcp_connect.py).
    assert listing["error"].startswith(f"Redirect to {mcp.url} not followed")
    assert "mcp_list_tools.failed" in kinds(events)
    assert redirector.hits and recorded_requests(mcp) == []


def test_forward_mode_resolves_the_name_before_the_upstream_connects(gateway_factory, upstream, mcp):
    strict_forward = gateway_factory(upstream.url, client_tools=ALLOWED)
    upstream.clear()
    for url in (on_localhost(mcp.url), mcp.url):
        reply = strict_forward.post("/v1/responses", {"input": "hi", "tools": [own(url)]})
        assert reply.status == 422, reply.body
        assert reply.json()["error"]["message"].endswith("is not allowed: it is a loopback address")
    reply = strict_forward.post("/v1/responses", {"input": "hi", "tools": [own("http://no-such-host.invalid/mcp")]})
    assert reply.status == 422 and "cannot be resolved" in reply.json()["error"]["message"]
    assert [r for r in upstream.requests() if r["method"] == "POST"] == []
    # Allow-listed: forwarded with the client's URL as given.
    trusting_forward = gateway_factory(upstream.url, client_tools={**ALLOWED,
                                                                   "allowed_mcp_destinations": ["127.0.0.0/8", "::1"]})
    reply = trusting_forward.post("/v1/responses", {"input": "hi", "tools": [own(on_localhost(mcp.url))]})
    assert reply.status == 200, reply.body
    assert upstream.last()["body"]["tools"] == [own(on_localhost(mcp.url))]
