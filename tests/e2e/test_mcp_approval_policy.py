"""The operator's MCP approval policy through `gateway serve`: a client's
`require_approval` may only tighten it (gateway/mcp_approval.py), in forward mode
(what the upstream is told) and in engine mode (what the engine does); a
`connector_id` under a label the operator did not configure is a client's own server."""

from __future__ import annotations

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.flows import checked
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server

CHAT = "/v1/chat/completions"
GUARDED = {"always": ["add"], "never": ["echo"]}


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-approval-policy")


def servers(url: str) -> list[dict]:
    return [{"name": "strict", "url": url, "require_approval": "always"},
            {"name": "filtered", "url": url, "require_approval": GUARDED}]


@pytest.fixture(scope="module")
def forward(gateway_factory, upstream):
    return gateway_factory(upstream.url, mcp_servers=servers("http://127.0.0.1:9/mcp"))


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, mcp):
    return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url, mcp_servers=servers(mcp.url)))


def tool(label: str, approval) -> dict:
    return {"type": "mcp", "server_label": label, "require_approval": approval}


@pytest.mark.parametrize("label, client, sent", [
    ("strict", "never", "always"),
    ("strict", {"always": [], "never": ["add", "echo"]}, "always"),
    ("filtered", "never", GUARDED),
    ("filtered", {"never": ["add", "echo"]}, GUARDED),
    ("filtered", "always", "always"),
])
def test_forward_mode_sends_the_operators_policy_or_tighter(forward, upstream, label, client, sent):
    upstream.clear()
    reply = forward.post("/v1/responses", {"input": "Use the add tool with 2 and 3", "tools": [tool(label, client)]})
    assert reply.status == 200, reply.body
    assert upstream.last()["body"]["tools"][0]["require_approval"] == sent
    # The upstream asks the client instead of calling the tool with the operator's credentials.
    assert [item["type"] for item in reply.json()["output"]] == ["mcp_list_tools", "mcp_approval_request"]


def tool_calls(server) -> list[dict]:
    return [r for r in recorded_requests(server) if r["method"] == "POST" and '"tools/call"' in r["body"]]


@pytest.mark.parametrize("label, client", [("strict", "never"), ("filtered", "never"),
                                           ("filtered", {"always": [], "never": ["add"]})])
def test_engine_mode_asks_for_approval_whatever_the_client_says(engine, mcp, label, client):
    clear_recorded_requests(mcp)
    status, frames = engine.stream({"input": "Use the add tool with 2 and 3", "tools": [tool(label, client)]})
    assert status == 200, frames
    events = checked(frames)
    output = events[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["mcp_list_tools", "mcp_approval_request"]
    assert output[1]["name"] == "add" and tool_calls(mcp) == []


def test_engine_mode_runs_what_both_policies_exempt(engine, mcp):
    clear_recorded_requests(mcp)
    reply = engine.post("/v1/responses", {"input": "Use the echo tool", "tools": [tool("filtered", "never")]})
    assert [item["type"] for item in reply.ok()["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    assert len(tool_calls(mcp)) == 1


CONNECTOR = {"type": "mcp", "server_label": "mine", "connector_id": "connector_dropbox"}


def test_a_connector_is_a_clients_server_refused_by_default(forward, upstream, engine, chat_upstream):
    for gateway, peer in ((forward, upstream), (engine, chat_upstream)):
        peer.clear()
        for connector in (CONNECTOR, {**CONNECTOR, "server_url": "https://mcp.example.com/mcp"}):
            reply = gateway.post("/v1/responses", {"input": "hi", "tools": [connector]})
            assert reply.status == 422, reply.body
            error = reply.json()["error"]
            assert error["param"] == "tools" and error["code"] == "mcp_server_not_allowed"
        assert [r for r in peer.requests() if r["method"] == "POST"] == []
