"""The stand-in's server-side tool loop, sans I/O: MCP servers listed before the first
model call, a function call ending the turn, file_search and MCP calls run and the model
called again, approvals asked for and answered, usage summed over every model call.
(Through the app: test_tools.py.)"""

from __future__ import annotations

from gateway.devserver.engine import approvals_from, run_turn
from gateway.devserver.tools import build_toolset

MCP = {"type": "mcp", "server_label": "calc", "server_url": "http://mcp.invalid/mcp"}
FUNCTION = {"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_a_plain_question_is_one_message():
    turn = run_turn(user("Hello there"), build_toolset(None))
    assert [step.kind for step in turn.steps] == ["message"]
    assert turn.output[0]["type"] == "message" and turn.output[0]["role"] == "assistant"
    assert turn.input_tokens > 0 and turn.output_tokens > 0 and not turn.hangs


def test_a_function_call_ends_the_turn_for_the_client():
    turn = run_turn(user("Use the get_weather tool for Paris"), build_toolset([FUNCTION]), tool_choice="required")
    assert [step.kind for step in turn.steps] == ["function_call"]
    call = turn.output[0]
    assert call["name"] == "get_weather" and call["call_id"].startswith("call_") and call["id"].startswith("fc_")


def test_mcp_tools_are_listed_first_then_called_then_answered():
    turn = run_turn(user("Use the add tool with 2 and 3"), build_toolset([{**MCP, "require_approval": "never"}]),
                    tool_choice="required")
    assert [step.kind for step in turn.steps] == ["mcp_list", "mcp_call", "message"]
    listed, called, answer = turn.output
    assert listed["server_label"] == "calc" and {tool["name"] for tool in listed["tools"]} >= {"add", "echo"}
    assert called["error"] is None and called["output"] is not None
    assert called["output"] in answer["content"][0]["text"]   # the model saw the tool's result


def test_an_mcp_call_needing_approval_stops_then_runs_once_approved():
    tools = build_toolset([{**MCP, "require_approval": "always"}])
    asked = run_turn(user("Use the add tool with 2 and 3"), tools, tool_choice="required")
    assert [step.kind for step in asked.steps] == ["mcp_list", "approval"]
    request = asked.output[-1]
    answer = [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}]
    verdicts = approvals_from(asked.output, answer)
    assert verdicts == {(request["name"], request["arguments"]): True}
    approved = run_turn(user("Use the add tool with 2 and 3"), tools, approvals=verdicts, tool_choice="required")
    assert [step.kind for step in approved.steps] == ["mcp_list", "mcp_call", "message"]
    denied = run_turn(user("Use the add tool with 2 and 3"), tools, tool_choice="required",
                      approvals={key: False for key in verdicts})
    assert [step.kind for step in denied.steps] == ["mcp_list"]   # dropped, and no message: as Llama Stack


def test_approvals_only_answer_requests_in_the_history():
    history = [{"type": "mcp_approval_request", "id": "a1", "name": "add", "arguments": "{}"}]
    answers = [{"type": "mcp_approval_response", "approval_request_id": "a1", "approve": 1},
               {"type": "mcp_approval_response", "approval_request_id": "unknown", "approve": True},
               {"type": "message", "role": "user", "content": "hi"}]
    assert approvals_from(history, answers) == {("add", "{}"): True}


def test_file_search_runs_here_and_usage_sums_both_model_calls():
    tools = build_toolset([{"type": "file_search", "vector_store_ids": ["vs_1"]}])
    turn = run_turn(user("Search the docs for restart"), tools, tool_choice="required")
    assert [step.kind for step in turn.steps] == ["file_search", "message"]
    search = turn.output[0]
    assert search["status"] == "completed" and search["results"]
    single = run_turn(user("Search the docs for restart"), build_toolset(None))
    assert turn.input_tokens > single.input_tokens   # two model calls, the second with the results
