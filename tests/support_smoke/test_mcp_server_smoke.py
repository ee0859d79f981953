"""The test MCP server (tests/support/mcp_server.py) serves its tools over streamable HTTP
and records the headers of every request it receives."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp_server import clear_recorded_requests, recorded_requests, start_mcp_server


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory):
    proc = start_mcp_server(tmp_path_factory.mktemp("mcp-server-smoke"))
    yield proc
    proc.stop()


def test_ready_line_and_url(mcp_server):
    assert mcp_server.url.startswith("http://127.0.0.1:") and mcp_server.url.endswith("/mcp")
    assert f"mcp server listening on {mcp_server.url}" in mcp_server.log()


def test_tools_and_header_recording(mcp_server):
    clear_recorded_requests(mcp_server)
    assert recorded_requests(mcp_server) == []

    async def session():
        http = httpx2.AsyncClient(headers={"X-Api-Key": "secret-9"})
        async with http, Client(streamable_http_client(mcp_server.url, http_client=http)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            added = await client.call_tool("add", {"a": 2, "b": 3})
            echoed = await client.call_tool("echo", {"text": "hi there"})
            return tools, added, echoed

    tools, added, echoed = asyncio.run(session())
    assert sorted(tools) == ["add", "echo"]
    assert tools["add"].description == "Add two integers."
    assert tools["echo"].description == "Echo text back."
    assert set(tools["add"].input_schema["properties"]) == {"a", "b"}
    assert added.content[0].text == "5"
    assert echoed.content[0].text == "hi there"

    records = recorded_requests(mcp_server)
    assert records and all(r["path"] == "/mcp" for r in records)
    assert all(r["headers"].get("x-api-key") == "secret-9" for r in records)
    calls = [json.loads(r["body"]) for r in records if r["method"] == "POST" and r["body"]]
    assert [c["params"]["name"] for c in calls if c.get("method") == "tools/call"] == ["add", "echo"]

    clear_recorded_requests(mcp_server)
    assert recorded_requests(mcp_server) == []
