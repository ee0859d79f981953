"""Server-side tools and the gateway's configured tools, in both modes: a `file_search`
description is sent as given and run by the server within one response;
`merge_server_tools` sends `X-LCS-Merge-Server-Tools: true`, and the gateway then adds
its configured MCP server to the agent's function (seen at the upstream)."""

from __future__ import annotations

import pytest

from gateway.sdk import Agent
from tests.sdk.conftest import sync_client
from tests.support.engine_gateway import engine_config


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@pytest.fixture(scope="module")
def configured(gateway_factory, upstream, chat_upstream, sdk_mcp):
    servers = [{"name": "ops", "url": sdk_mcp.url}]
    return {"forward": (gateway_factory(upstream.url, mcp_servers=servers), upstream),
            "engine": (gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url, mcp_servers=servers)),
                       chat_upstream)}


def tool_names(mode: str, peer) -> list[str]:
    if mode == "forward":
        return [t.get("name") or f"{t['type']}:{t.get('server_label')}" for t in peer.last()["body"]["tools"]]
    return [t["function"]["name"] for t in peer.last("/v1/chat/completions")["body"]["tools"]]


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_merge_server_tools_is_the_agents_choice(configured, mode):
    gateway, peer = configured[mode]
    alone = Agent(sync_client(gateway), tools=[multiply])
    assert alone.run("Hello").output_text.startswith("Scripted reply")
    assert tool_names(mode, peer) == ["multiply"]
    merged = Agent(sync_client(gateway), tools=[multiply], merge_server_tools=True)
    assert merged.run("Hello").output_text.startswith("Scripted reply")
    if mode == "forward":
        assert tool_names(mode, peer) == ["multiply", "mcp:ops"]
    else:  # the engine lists the configured server's tools for the model
        assert tool_names(mode, peer)[0] == "multiply" and {"add", "echo"} <= set(tool_names(mode, peer))


@pytest.fixture(scope="module")
def searching(gateway_factory, upstream, chat_upstream, tmp_path_factory):
    from tests.support.vector_store import start_vector_store

    stores = start_vector_store(tmp_path_factory.mktemp("sdk-vector-store"))
    yield {"forward": gateway_factory(upstream.url, byok_rag=[{"rag_id": "manuals", "vector_db_id": "vs_manuals"}]),
           "engine": gateway_factory(chat_upstream.url, **engine_config(
               chat_upstream.url, byok_rag=[{"rag_id": "manuals", "vector_db_id": "vs_manuals",
                                             "search_url": stores.url}]))}
    stores.stop()


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_a_server_side_tool_is_left_to_the_server(searching, mode):
    agent = Agent(sync_client(searching[mode]), tools=[{"type": "file_search", "vector_store_ids": ["manuals"]}])
    assert agent.tool_definitions == [{"type": "file_search", "vector_store_ids": ["manuals"]}]
    result = agent.run("search the manuals for the Falcon launch code")
    kinds = [item["type"] for item in result.items]
    assert kinds == ["message", "file_search_call", "message"]
    assert result.output_text.startswith("Tool said:")
    assert result.usage.requests == 1  # the server ran it within one response
