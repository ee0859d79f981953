"""The engine's tools plug in (gateway/engine/executor.py): each kind of server-side tool
checks and echoes its own tools, offers the model its functions, and shows their calls
only as the item kinds it declares (no sockets)."""

from __future__ import annotations

import pytest

from gateway.config import LlamaStackConfig, McpServerConfig
from gateway.engine.executor import EngineTool, Setup
from gateway.engine.items import Lifecycle
from gateway.engine.mcp_tools import McpTools
from gateway.engine.vector_search import FileSearchExecutor
from gateway.engine.web_search import WebSearchExecutor
from gateway.schema.errors import ApiError
from gateway.upstream.client import UpstreamClient
from tests.engine.fakes import emitter, plan

MCP = {"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:9/mcp", "authorization": "secret"}
LISTED = {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "calc", "error": None,
          "tools": [{"name": "add", "input_schema": {"type": "object"}}, {"name": "wipe", "input_schema": {}}]}


def setup(tools: list[dict], history: list[dict] = (), body: dict | None = None) -> Setup:  # type: ignore[assignment]
    return Setup({"tools": tools, **(body or {})}, tools, list(history), [], plan(), emitter())


def file_search() -> FileSearchExecutor:
    return FileSearchExecutor(UpstreamClient(LlamaStackConfig(url="http://127.0.0.1:9", max_retries=0)))


def test_the_item_kinds_are_declared_once():
    kinds = [kind for tool in (McpTools(), file_search(), WebSearchExecutor(None)) for kind in tool.item_kinds]
    assert sorted(kind.type for kind in kinds) == ["file_search_call", "mcp_approval_request", "mcp_call",
                                                   "mcp_list_tools", "web_search_call"]
    assert {kind.lifecycle for kind in kinds} == set(Lifecycle)


@pytest.mark.parametrize("tool, request_tool", [
    (file_search(), {"type": "file_search", "vector_store_ids": ["vs_1"]}),
    (WebSearchExecutor(None), {"type": "web_search"}),
])
def test_a_search_offers_one_function_shown_as_its_own_kind(tool: EngineTool, request_tool: dict):
    the_setup = setup([request_tool])
    tool.offer(the_setup)
    [(name, shown)] = the_setup.emitter.call_items.items()
    assert shown.kind in tool.item_kinds and shown.kind.lifecycle is Lifecycle.SEARCH
    assert [entry["function"]["name"] for entry in the_setup.plan.chat["tools"]] == [name]
    assert tool.can_execute(the_setup.plan.tools[name])


def test_tools_of_another_kind_are_left_alone():
    the_setup = setup([{"type": "function", "name": "f", "parameters": {}}])
    for tool in (McpTools(), file_search(), WebSearchExecutor(None)):
        tool.offer(the_setup)
        tool.check(the_setup.body)
        assert tool.echo(the_setup.tools[0]) is None
    assert the_setup.emitter.call_items == {} and the_setup.plan.prelude is None


async def test_mcp_tools_are_offered_by_the_prelude_as_its_kinds():
    tool = {**MCP, "require_approval": {"always": ["wipe"], "never": ["add"]}}
    the_setup = setup([tool], history=[LISTED])
    McpTools().offer(the_setup)
    assert the_setup.emitter.call_items == {}  # listed first, in the prelude
    async for _ in the_setup.plan.prelude():
        pass
    shown = the_setup.emitter.call_items
    assert [shown["add"].kind.type, shown["wipe"].kind.type] == ["mcp_call", "mcp_approval_request"]
    assert all(entry.kind in McpTools.item_kinds for entry in shown.values())


def test_mcp_echo_drops_what_the_gateway_attached():
    configured = McpTools([McpServerConfig(name="calc", url="http://127.0.0.1:9/mcp")])
    assert configured.echo(MCP) == {"type": "mcp", "server_label": "calc"}
    assert McpTools().echo(MCP) == {"type": "mcp", "server_label": "calc", "server_url": MCP["server_url"]}


@pytest.mark.parametrize("tool, body, param", [
    (McpTools(), {"tools": [{"type": "mcp", "server_label": "x", "connector_id": "c"}]}, "tools"),
    (WebSearchExecutor(None), {"tools": [{"type": "web_search"}]}, "tools"),
    (WebSearchExecutor(None), {"tools": [], "tool_choice": {"type": "web_search"}}, "tool_choice"),
])
def test_each_kind_refuses_what_it_cannot_run(tool: EngineTool, body: dict, param: str):
    with pytest.raises(ApiError) as raised:
        tool.check(body)
    assert raised.value.status == 422 and raised.value.param == param
