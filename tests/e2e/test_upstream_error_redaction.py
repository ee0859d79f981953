"""What the gateway injected never comes back through the upstream's errors
(gateway/redaction.py): the scripted upstream's `echo-error` triggers repeat the
request's credentials, tools and URLs in an error, as a careless upstream would; the
client sees `[redacted]` and `[MCP server '<label>']` instead, in JSON error bodies,
`response.failed` and error events, in both modes. The session-wide scan
(tests/conftest.py) checks every byte these gateways sent as well."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.flows import checked

API_KEY = "upstream-api-key-5d1e"
MCP_SECRET = "calc-file-secret-91b7"
MCP_URL = "http://10.99.0.5:8080/mcp"
GONE_URL = "http://unreachable.example:9/mcp"
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("redaction") / "calc-token"
    path.write_text(f"Bearer {MCP_SECRET}\n")
    return path


@pytest.fixture(scope="module")
def forward(gateway_factory, upstream, secret_file):
    return gateway_factory(upstream.url, llama_stack={"api_key": API_KEY}, mcp_servers=[
        {"name": "calc", "url": MCP_URL, "authorization_headers": {"Authorization": str(secret_file)}}])


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    config = engine_config(chat_upstream.url)
    return gateway_factory(chat_upstream.url, llama_stack={**config["llama_stack"], "api_key": API_KEY})


def assert_scrubbed(text: str) -> None:
    for injected in (API_KEY, MCP_SECRET, MCP_URL, "10.99.0.5:8080"):
        assert injected not in text, (injected, text)


CALC = [{"type": "mcp", "server_label": "calc"}]


@pytest.mark.parametrize("tools", [CALC, None])
def test_a_json_error_body_is_scrubbed(forward, upstream, tools):
    upstream.clear()
    body = {"input": "echo-error now"} | ({"tools": tools} if tools else {})
    reply = forward.post("/v1/responses", body)
    assert reply.status == 400, reply.body
    # The upstream got the credentials and echoed them...
    sent = upstream.last()
    assert sent["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert sent["body"]["tools"][0]["authorization"] == MCP_SECRET
    # ...the client does not see them.
    assert_scrubbed(reply.body.decode())
    cause = reply.json()["detail"]["cause"]
    assert "scripted echo: Authorization=Bearer [redacted]" in cause
    assert '"server_url":"[MCP server \'calc\']"' in cause and '"authorization":"[redacted]"' in cause


def test_response_failed_is_scrubbed(forward):
    status, frames = forward.stream({"input": "echo-error now", "tools": CALC})
    assert status == 200
    events = checked(frames)
    assert events[-1]["type"] == "response.failed"
    assert "[redacted]" in events[-1]["response"]["error"]["message"]
    assert_scrubbed(json.dumps(events))


def test_an_error_event_before_the_stream_is_scrubbed(forward):
    reply = forward.post("/v1/responses", {"input": "echo-error-first", "tools": CALC, "stream": True})
    assert reply.status == 400, reply.body
    assert "[MCP server 'calc']" in reply.json()["detail"]["cause"]
    assert_scrubbed(reply.body.decode())


def test_an_unreachable_configured_server_is_named_not_located(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, mcp_servers=[{"name": "gone", "url": GONE_URL}])
    reply = gateway.post("/v1/responses", {"input": "Use the add tool"})
    assert reply.status == 500, reply.body
    assert reply.json()["detail"]["cause"] == "Failed to connect to MCP server at [MCP server 'gone']: " \
                                              "Connection refused"
    status, frames = gateway.stream({"input": "Use the add tool"})
    failed = checked(frames)[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"]["message"] == \
        "Failed to connect to MCP server at [MCP server 'gone']: Connection refused"
    assert GONE_URL.encode() not in gateway.recording.read_bytes()


@pytest.mark.parametrize("stream", [False, True])
def test_engine_mode_scrubs_the_chat_upstreams_errors(engine, chat_upstream, stream):
    status, frames = engine.stream({"input": "echo-error now"}) if stream else (None, None)
    if stream:
        failed = checked(frames)[-1]
    else:
        failed = engine.post("/v1/responses", {"input": "echo-error now"}).ok()
        failed = {"type": "response.failed", "response": failed}
    assert chat_upstream.last(CHAT)["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert failed["type"] == "response.failed"
    assert "Authorization=Bearer [redacted]" in failed["response"]["error"]["message"]
    assert API_KEY not in json.dumps(failed)


def test_engine_mode_scrubs_an_error_first(engine):
    reply = engine.post("/v1/responses", {"input": "echo-error-first", "stream": True})
    assert reply.status == 500, reply.body
    assert "Authorization=Bearer [redacted]" in reply.json()["detail"]["cause"]
    assert API_KEY not in reply.body.decode()


def test_the_scan_would_see_these_leaks(forward, engine):
    # The session-wide scan (tests/conftest.py) covers these gateways' error bodies:
    # it knows both injected credentials.
    assert {API_KEY, MCP_SECRET} <= forward.secrets() and API_KEY in engine.secrets()
    assert forward.leaked_secrets() == set() and engine.leaked_secrets() == set()
