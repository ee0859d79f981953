"""Server-side tools and the gateway's configured tools: `merge_server_tools` sends
`X-LCS-Merge-Server-Tools: true`, and the gateway then adds its configured MCP server to
the agent's function (in both modes, seen at the upstream)."""

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
