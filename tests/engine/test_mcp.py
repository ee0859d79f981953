"""The MCP executor's pure parts, and its items and events through the loop with a
scripted model (no sockets; the real MCP servers are in tests/e2e/test_engine_mcp*.py).
A request's MCP tools and approvals: test_mcp_tools.py; a session's failures:
test_mcp_session.py."""

from __future__ import annotations

import pytest

from gateway.destinations import DestinationPolicy
from gateway.engine import mcp as mcp_module
from gateway.engine.executor import ToolCall, ToolResult
from gateway.engine.loop import Loop
from gateway.engine.items import CallItem
from gateway.engine.mcp import MAX_OUTPUT_CHARS, McpExecutor, McpFailure, McpServer, cut_error, model_name
from gateway.engine.mcp_types import MCP_APPROVAL_REQUEST, MCP_CALL, McpLimits
from tests.engine.fakes import FakeModel, calls_round, emitter, plan, text_round
from tests.engine.test_loop import check_stream, kinds, run

SERVER = McpServer("calc", "http://127.0.0.1:1/mcp", {"Authorization": "Bearer t"}, 5)


@pytest.mark.parametrize("name, taken, expected", [
    ("add", set(), "add"),
    ("add", {"add"}, "calc__add"),
    ("add", {"add", "calc__add"}, "calc__add_2"),
    ("a.b", {"a.b"}, "calc__a_b"),
    ("x" * 80, {"x" * 80}, ("calc__" + "x" * 80)[:64]),
])
def test_model_names_are_unique_and_valid(name, taken, expected):
    assert model_name("calc", name, taken) == expected


async def test_outputs_are_capped_and_errors_carried(monkeypatch):
    async def long_output(server, name, arguments, listed=None):
        assert (server, name, arguments) == (SERVER, "add", {"a": 1})
        return "x" * (MAX_OUTPUT_CHARS + 10)

    tool = {"type": "mcp_tool", "server": SERVER, "mcp_name": "add"}
    monkeypatch.setattr(mcp_module, "call_tool", long_output)
    result = await McpExecutor().execute(ToolCall("c1", "calc__add", '{"a": 1}', tool))
    assert len(result.output) < MAX_OUTPUT_CHARS + 60 and result.output.endswith("characters]")
    assert result.fields == {"output": result.output} and not result.is_error

    async def failing(server, name, arguments, listed=None):
        raise McpFailure({"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "no"}]})

    monkeypatch.setattr(mcp_module, "call_tool", failing)
    result = await McpExecutor().execute(ToolCall("c1", "add", '{"a": 1}', tool))
    assert result.is_error and result.output == "no" and result.fields["error"]["type"] == "mcp_tool_execution_error"
    result = await McpExecutor().execute(ToolCall("c1", "add", "[1]", tool))
    assert result.is_error and result.fields["error"]["code"] == -32602


def test_only_servers_the_operator_did_not_configure_are_guarded():
    policy = DestinationPolicy.of(["10.0.0.0/8"])
    tool = {"type": "mcp", "server_label": "calc", "server_url": "http://calc/mcp"}
    assert McpServer.of(tool, {"calc": None}, policy).guard is None
    assert McpServer.of({**tool, "server_label": "mine"}, {"calc": None}, policy).guard is policy
    assert McpServer.of({**tool, "server_label": "mine"}, {"calc": None}).guard == DestinationPolicy()


def test_only_servers_the_operator_did_not_configure_are_limited():
    tool = {"type": "mcp", "server_label": "calc", "server_url": "http://calc/mcp"}
    limits = McpLimits(2048, 3, 512)
    assert McpServer.of(tool, {"calc": None}, None, limits).limits is None
    assert McpServer.of({**tool, "server_label": "mine"}, {"calc": None}, None, limits).limits is limits
    assert McpServer.of({**tool, "server_label": "mine"}, {}).limits == McpLimits()


async def test_an_error_is_cut_like_an_output(monkeypatch):
    """An `isError` result as long as the tool likes reaches the item and the model cut."""
    async def loud(server, name, arguments, listed=None):
        raise McpFailure({"type": "mcp_tool_execution_error", "content": [
            {"type": "text", "text": "a" * MAX_OUTPUT_CHARS}, {"type": "text", "text": "b" * 50}]})

    monkeypatch.setattr(mcp_module, "call_tool", loud)
    tool = {"type": "mcp_tool", "server": SERVER, "mcp_name": "add"}
    result = await McpExecutor().execute(ToolCall("c1", "add", "{}", tool))
    note = f"\n[output cut at {MAX_OUTPUT_CHARS} characters]"
    assert result.is_error and result.output == "a" * MAX_OUTPUT_CHARS + note
    assert result.fields["error"]["content"] == [{"type": "text", "text": "a" * MAX_OUTPUT_CHARS + note}]
    assert cut_error({"type": "http_error", "message": "m" * (MAX_OUTPUT_CHARS + 1)})["message"].endswith(note)
    small = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "no"}]}
    assert cut_error(small) is small


async def test_a_call_to_a_refused_address_is_an_error_result_the_model_reads():
    """A name that resolves to loopback by the time of the call (no socket is opened)."""
    server = McpServer("mine", "http://localhost:9/mcp", {}, 5, DestinationPolicy())
    tool = {"type": "mcp_tool", "server": server, "mcp_name": "add"}
    result = await McpExecutor().execute(ToolCall("c1", "add", '{"a": 1}', tool))
    assert result.is_error and result.output == "MCP server host 'localhost' is not allowed: it is a loopback address"
    assert result.fields == {"error": {"type": "http_error", "code": 0, "message": result.output}}


class FakeMcp:
    def can_execute(self, tool):
        return tool.get("type") == "mcp_tool"

    async def execute(self, call):
        return ToolResult("5", fields={"output": "5"})


def mcp_plan(approval=False):
    the_plan = plan()
    the_plan.tools = {"add": {"type": "mcp_tool", "name": "add"}}
    the_plan.tool_choice = "auto"
    the_emitter = emitter()
    kind = MCP_APPROVAL_REQUEST if approval else MCP_CALL
    the_emitter.call_items["add"] = CallItem(kind, {"server_label": "calc", "name": "add"} | (
        {} if approval else {"output": None, "error": None}))
    return the_plan, the_emitter


async def test_an_mcp_call_is_one_item_with_its_events():
    the_plan, the_emitter = mcp_plan()
    model = FakeModel(calls_round(("call_1", "add", '{"a": 2}')), text_round("Five"))
    events = await run(Loop(model, [FakeMcp()]), the_plan, the_emitter)
    check_stream(events)
    assert kinds(events)[2:8] == ["output_item.added", "mcp_call_arguments.delta", "mcp_call_arguments.done",
                                  "mcp_call.in_progress", "mcp_call.completed", "output_item.done"]
    call = events[-1].data["response"]["output"][0]
    assert call["type"] == "mcp_call" and call["output"] == "5" and call["status"] == "completed"
    assert call["arguments"] == '{"a": 2}' and "call_id" not in call
    assert model.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}


async def test_an_approval_request_ends_the_response_without_running():
    the_plan, the_emitter = mcp_plan(approval=True)
    model = FakeModel(calls_round(("call_1", "add", '{"a": 2}')))
    events = await run(Loop(model, [FakeMcp()]), the_plan, the_emitter)
    check_stream(events)
    assert kinds(events)[2:] == ["output_item.added", "output_item.done", "completed"]
    request = events[-1].data["response"]["output"][0]
    assert request["type"] == "mcp_approval_request" and request["arguments"] == '{"a": 2}'
    assert len(model.requests) == 1


async def test_a_round_mixing_a_function_call_pauses_without_running_the_mcp_call():
    the_plan, the_emitter = mcp_plan()
    the_plan.tools["get_time"] = {"type": "function", "name": "get_time"}
    executor = FakeMcp()
    executor.execute = None  # never called
    model = FakeModel(calls_round(("call_1", "add", '{"a": 2}'), ("call_2", "get_time", "{}")))
    events = await run(Loop(model, [executor]), the_plan, the_emitter)
    check_stream(events)
    call, function = events[-1].data["response"]["output"]
    assert call["type"] == "mcp_call" and call["status"] == "failed" and "spec 002" in \
        call["error"]["content"][0]["text"]
    assert function["type"] == "function_call" and events[-1].type == "response.completed"
