"""What clients may do with the operator's tools: merge their own with the configured
ones (`X-LCS-Merge-Server-Tools`), never shadow them, never redirect them, never read
their credentials back."""

from __future__ import annotations

import shutil

import pytest

from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK

MCP_URL = "http://127.0.0.1:9/mcp"
SECRET = "operator-mcp-credential-42"
MERGE = {"X-LCS-Merge-Server-Tools": "true"}
FUNCTION = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def operated(gateway_factory, upstream, tmp_path_factory):
    secret = tmp_path_factory.mktemp("secrets") / "calc-token"
    secret.write_text(f"Bearer {SECRET}\n")
    return gateway_factory(upstream.url, mcp_servers=[
        {"name": "calc", "url": MCP_URL, "authorization_headers": {"Authorization": str(secret)}}],
        byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"}], client_tools=CLIENT_MCP_ON_LOOPBACK)


def sent_tools(gateway, upstream, body: dict, headers: dict | None = None) -> list[dict]:
    upstream.clear()
    reply = gateway.post("/v1/responses", body, headers=headers)
    assert reply.status == 200, reply.body
    return upstream.last()["body"]["tools"]


def test_merge_header_puts_the_clients_tools_first(operated, upstream):
    tools = sent_tools(operated, upstream, {"input": "weather?", "tools": [FUNCTION]}, MERGE)
    assert [(t["type"], t.get("name") or t.get("server_label")) for t in tools] == [
        ("function", "get_weather"), ("file_search", None), ("mcp", "calc")]
    assert tools[2]["authorization"] == SECRET and tools[2]["server_url"] == MCP_URL
    # Without the header the client's tools are used as given.
    assert sent_tools(operated, upstream, {"input": "weather?", "tools": [FUNCTION]}) == [FUNCTION]


@pytest.mark.parametrize("tool, cause", [
    ({"type": "mcp", "server_label": "calc"},
     "Client MCP tool with server_label 'calc' conflicts with a server-configured MCP tool. "
     "Rename the client tool to avoid the conflict."),
    ({"type": "file_search", "vector_store_ids": ["handbook"]},
     "Client file_search tool conflicts with a server-configured file_search tool. "
     "Remove the client file_search to use the server's configuration."),
])
def test_merge_conflicts_are_409_with_lcores_strings(operated, upstream, tool, cause):
    upstream.clear()
    reply = operated.post("/v1/responses", {"input": "clash", "tools": [tool]}, headers=MERGE)
    assert reply.status == 409
    assert reply.json()["detail"] == {"response": "Tool conflict", "cause": cause}
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []


def test_the_scan_for_secrets_sees_the_configured_credential(operated, tmp_path):
    # The session-wide check (tests/conftest.py) scans what every gateway sent; this
    # proves it would notice this gateway's credential.
    assert SECRET in operated.secrets()
    assert operated.post("/v1/responses", {"input": "Use the add tool"}).status == 200
    assert operated.leaked_secrets() == set()
    planted = tmp_path / "planted.bin"
    shutil.copy(operated.recording, planted)
    with planted.open("ab") as recording:
        recording.write(f'{{"authorization": "{SECRET}"}}'.encode())
    original, operated.recording = operated.recording, planted
    try:
        assert operated.leaked_secrets() == {SECRET}
    finally:
        operated.recording = original


def test_the_tool_echo_never_carries_what_the_gateway_attached(operated, upstream):
    own = {"type": "mcp", "server_label": "own", "server_url": "http://127.0.0.1:9/own",
           "headers": {"X-Trace": "t"}, "authorization": "the-clients-own-token"}
    body = {"input": "plain", "tools": [{"type": "mcp", "server_label": "calc"}, own],
            "metadata": {"scripted_echo_tools": "verbatim"}}
    # The upstream got the credentials (it needs them) and echoes them back...
    sent = sent_tools(operated, upstream, body)
    assert sent[0]["authorization"] == SECRET
    reply = operated.post("/v1/responses", body)
    assert reply.status == 200, reply.body
    expected = [{"type": "mcp", "server_label": "calc", "require_approval": "never"},
                {"type": "mcp", "server_label": "own", "server_url": "http://127.0.0.1:9/own"}]
    # ...the client sees neither credentials nor the configured server's URL.
    assert reply.json()["tools"] == expected
    assert operated.get(f"/v1/responses/{reply.json()['id']}").json()["tools"] == expected
    status, frames = operated.stream(body)
    echoed = [data["response"]["tools"] for _, data in frames if isinstance(data, dict) and "response" in data]
    assert status == 200 and echoed and all(tools == expected for tools in echoed)
    assert SECRET.encode() not in reply.body and MCP_URL.encode() not in reply.body
