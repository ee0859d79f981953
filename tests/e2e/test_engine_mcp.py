"""The local engine's MCP executor through `gateway serve` (llama_stack.api:
chat_completions) in front of the scripted Chat Completions upstream and real MCP
servers built with the `mcp` package (tests/support/mcp_server.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.flows import WEATHER_TOOL, checked, kinds
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server
from tests.support.openai_shapes import replay_through_sdk, validate_response

CHAT = "/v1/chat/completions"
AUTH = {"Authorization": "Bearer user-token-1"}
UNREACHABLE = "http://127.0.0.1:9/mcp"


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-engine")


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-engine-faulty", faulty=True)


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, mcp, faulty, tmp_path_factory):
    secret = tmp_path_factory.mktemp("engine-secrets") / "calc-token"
    secret.write_text("engine-s3cret\n")
    return gateway_factory(
        chat_upstream.url, authentication={"module": "noop-with-token"},
        llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"},
        mcp_servers=[
            {"name": "calc", "url": mcp.url, "authorization_headers": {"Authorization": str(secret)},
             "headers": ["X-Tenant"]},
            {"name": "faulty", "url": faulty.url, "authorization_headers": {"Authorization": "kubernetes"},
             "timeout": 5},
            {"name": "gone", "url": UNREACHABLE, "timeout": 2},
            {"name": "byclient", "url": mcp.url, "authorization_headers": {"X-Api-Key": "client"}},
        ])


def calc(**extra):
    return {"type": "mcp", "server_label": "calc", **extra}


def stream(engine, body, headers=AUTH):
    status, frames = engine.stream(body, headers=headers)
    assert status == 200, frames
    return checked(frames)  # numbered from 0, every event an `openai` type


def items(events):
    return events[-1]["response"]["output"]


def test_list_and_call_stream_in_order(engine, chat_upstream, mcp):
    clear_recorded_requests(mcp)
    events = stream(engine, {"input": "Use the add tool with 2 and 3", "tools": [calc()]},
                    headers={**AUTH, "X-Tenant": "acme"})
    assert kinds(events) == [
        "created", "in_progress",
        "output_item.added", "mcp_list_tools.in_progress", "mcp_list_tools.completed", "output_item.done",
        "output_item.added", *["mcp_call_arguments.delta"] * (len(events) - 20), "mcp_call_arguments.done",
        "mcp_call.in_progress", "mcp_call.completed", "output_item.done",
        "output_item.added", "content_part.added", "output_text.delta", "output_text.delta", "output_text.delta",
        "output_text.done", "content_part.done", "output_item.done", "completed"]
    listing, call, message = items(events)
    assert listing["type"] == "mcp_list_tools" and listing["server_label"] == "calc"
    assert [tool["name"] for tool in listing["tools"]] == ["add", "echo"]
    assert call["type"] == "mcp_call" and call["name"] == "add" and call["server_label"] == "calc"
    assert json.loads(call["arguments"]) == {"a": 2, "b": 3} and call["output"] == "5" and call["error"] is None
    assert call["status"] == "completed" and message["content"][0]["text"] == "Tool said: 5"
    assert replay_through_sdk(events).output_text == "Tool said: 5"
    # The model saw the listed tools as functions, and the result as the tool message.
    first, second = [r["body"] for r in chat_upstream.requests(CHAT)[-2:]]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["add", "echo"]
    assert second["messages"][-1]["content"] == "5"
    # Every MCP request carried the configured credential and the propagated header,
    # LCORE's OAuth probe (an `initialize` of its own) included.
    posts = [r for r in recorded_requests(mcp) if r["method"] == "POST"]
    assert len(posts) >= 6 and any(probe(r) for r in posts)
    assert all(r["headers"].get("authorization") == "Bearer engine-s3cret" for r in posts)
    assert all(r["headers"].get("x-tenant") == "acme" for r in posts)
    # Nothing the gateway attached is echoed.
    echoed = events[-1]["response"]["tools"]
    assert echoed == [{"type": "mcp", "server_label": "calc", "require_approval": "never"}]
    # One listing, then one call: the call's session validated `add`'s structured result
    # against the output schema that listing gave, without a `tools/list` of its own.
    assert methods(mcp) == ["initialize", "notifications/initialized", "tools/list",
                            "initialize", "notifications/initialized", "tools/call"]


def probe(request) -> bool:
    """LCORE's OAuth probe (`turns/tools.py`): an `initialize` before every turn."""
    return "gateway-oauth-probe" in request["body"]


def methods(mcp):
    """The JSON-RPC methods the MCP server was sent by the turns, in order."""
    return [json.loads(r["body"]).get("method") for r in recorded_requests(mcp)
            if r["method"] == "POST" and r["body"].startswith("{") and not probe(r)]


def test_json_body_and_the_listing_reused_by_the_next_turn(engine, mcp):
    first = engine.post("/v1/responses", {"input": "Use the echo tool", "tools": [calc()]}, headers=AUTH).ok()
    validate_response(first)
    assert [item["type"] for item in first["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    clear_recorded_requests(mcp)
    events = stream(engine, {"input": "Now add 4 and 5 with the tool", "tools": [calc()],
                             "previous_response_id": first["id"]})
    assert "mcp_list_tools.in_progress" not in kinds(events)
    assert [item["type"] for item in items(events)] == ["mcp_call", "message"]
    assert items(events)[0]["output"] == "9"
    # The call is one call: no listing before it (the `mcp` client would list to find
    # the output schema; the listing this turn reuses keeps none, so none is checked).
    assert methods(mcp) == ["initialize", "notifications/initialized", "tools/call"]


def test_allowed_tools(engine, chat_upstream):
    events = stream(engine, {"input": "Use the tool to say hi", "tools": [calc(allowed_tools=["echo"])]})
    listing, call, _ = items(events)
    assert [tool["name"] for tool in listing["tools"]] == ["echo"] and call["name"] == "echo"
    assert [tool["function"]["name"] for tool in chat_upstream.requests(CHAT)[-2]["body"]["tools"]] == ["echo"]


def test_a_tool_that_raises_is_fed_back_and_the_loop_goes_on(engine, faulty):
    events = stream(engine, {"input": "Use the explode tool", "tools": [{"type": "mcp", "server_label": "faulty"}]})
    listing, call, message = items(events)
    assert call["name"] == "explode" and call["status"] == "failed" and call["output"] is None
    assert call["error"]["type"] == "mcp_tool_execution_error"
    assert "explode refused" in call["error"]["content"][0]["text"]
    assert "mcp_call.failed" in kinds(events) and events[-1]["type"] == "response.completed"
    assert message["content"][0]["text"].startswith("Tool said: Error: ")


def test_the_callers_bearer_goes_to_a_kubernetes_server(engine, faulty):
    clear_recorded_requests(faulty)
    stream(engine, {"input": "Use the echo tool", "tools": [{"type": "mcp", "server_label": "faulty"}]})
    posts = [r for r in recorded_requests(faulty) if r["method"] == "POST"]
    assert posts and all(r["headers"].get("authorization") == "Bearer user-token-1" for r in posts)


def test_mcp_headers_reach_a_client_server_on_every_request(engine, mcp):
    clear_recorded_requests(mcp)
    headers = {**AUTH, "MCP-HEADERS": json.dumps({"byclient": {"X-Api-Key": "k-123"}})}
    events = stream(engine, {"input": "Use the echo tool", "tools": [{"type": "mcp", "server_label": "byclient"}]},
                    headers=headers)
    assert [item["type"] for item in items(events)] == ["mcp_list_tools", "mcp_call", "message"]
    posts = [r for r in recorded_requests(mcp) if r["method"] == "POST"]
    assert len(posts) >= 4 and all(r["headers"].get("x-api-key") == "k-123" for r in posts)


def test_an_unreachable_server_is_a_failed_listing_not_a_hung_turn(engine):
    events = stream(engine, {"input": "Use a tool please", "tools": [{"type": "mcp", "server_label": "gone"}]})
    assert kinds(events)[2:6] == ["output_item.added", "mcp_list_tools.in_progress", "mcp_list_tools.failed",
                                  "output_item.done"]
    listing, message = items(events)
    assert listing["error"] and "unreachable" in listing["error"] and listing["tools"] == []
    assert events[-1]["type"] == "response.completed" and message["type"] == "message"


def test_colliding_names_are_disambiguated_and_mapped_back(engine, chat_upstream):
    tools = [calc(), {"type": "mcp", "server_label": "faulty"}]
    events = stream(engine, {"input": "Use faulty__echo to repeat me", "tools": tools})
    names = [tool["function"]["name"] for tool in chat_upstream.requests(CHAT)[-2]["body"]["tools"]]
    assert names[:2] == ["add", "echo"] and "faulty__add" in names and "faulty__echo" in names
    call = next(item for item in items(events) if item["type"] == "mcp_call")
    assert call["name"] == "echo" and call["server_label"] == "faulty" and call["status"] == "completed"


def test_tool_choice_mcp_forces_that_tool_in_the_first_round(engine, chat_upstream):
    """`{"type": "mcp", "server_label", "name"}` as a forced function: the name the model
    sees (here disambiguated), first round only; the response echoes the choice."""
    chat_upstream.clear()
    choice = {"type": "mcp", "server_label": "faulty", "name": "echo"}
    events = stream(engine, {"input": "hello there", "tools": [calc(), {"type": "mcp", "server_label": "faulty"}],
                             "tool_choice": choice})
    first, second = [r["body"] for r in chat_upstream.requests(CHAT)]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "faulty__echo"}}
    assert second["tool_choice"] == "auto"
    call = next(item for item in items(events) if item["type"] == "mcp_call")
    assert (call["server_label"], call["name"], call["status"]) == ("faulty", "echo", "completed")
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["tool_choice"] == choice
    validate_response(events[-1]["response"])
    # Without `name`: the first round must call one of the tools.
    chat_upstream.clear()
    stream(engine, {"input": "hello there", "tools": [calc()], "tool_choice": {"type": "mcp", "server_label": "calc"}})
    assert chat_upstream.requests(CHAT)[0]["body"]["tool_choice"] == "required"


def test_tool_choice_mcp_naming_a_server_the_request_lacks_is_a_422(engine, chat_upstream):
    chat_upstream.clear()
    reply = engine.post("/v1/responses", {"input": "hi", "tools": [calc()],
                                          "tool_choice": {"type": "mcp", "server_label": "faulty", "name": "echo"}},
                        headers=AUTH)
    assert reply.status == 422, reply.body
    error = reply.json()["error"]
    assert error["param"] == "tool_choice" and "'faulty', which is not among the request's tools" in error["message"]
    assert chat_upstream.requests(CHAT) == []


def test_an_unconfigured_server_is_refused_before_anything(engine, chat_upstream):
    chat_upstream.clear()
    reply = engine.post("/v1/responses", {"input": "hi", "tools": [
        {"type": "mcp", "server_label": "mine", "server_url": "http://169.254.169.254/mcp"}]}, headers=AUTH)
    assert reply.status == 422 and reply.json()["error"]["param"] == "tools"
    assert "not configured" in reply.json()["error"]["message"]
    assert chat_upstream.requests(CHAT) == []


def tool_calls(server):
    return [r for r in recorded_requests(server) if r["method"] == "POST" and '"tools/call"' in r["body"]]


def ask_approval(engine, mcp, guarded):
    clear_recorded_requests(mcp)
    events = stream(engine, {"input": "Use the add tool with 2 and 3", "tools": [guarded]})
    listing, request = items(events)
    assert request["type"] == "mcp_approval_request" and request["name"] == "add"
    assert request["server_label"] == "calc" and json.loads(request["arguments"]) == {"a": 2, "b": 3}
    assert events[-1]["type"] == "response.completed" and kinds(events)[-3:] == [
        "output_item.added", "output_item.done", "completed"]
    assert tool_calls(mcp) == []  # not run before the client approves
    return events[-1]["response"]["id"], request["id"]


def answer(engine, previous, request_id, approve, guarded):
    return {"previous_response_id": previous, "tools": [guarded], "input": [
        {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve}]}


def test_approval_requested_then_approved(engine, mcp):
    guarded = calc(require_approval="always")
    previous, request_id = ask_approval(engine, mcp, guarded)
    events = stream(engine, answer(engine, previous, request_id, True, guarded))
    call, message = [item for item in items(events) if item["type"] != "mcp_list_tools"]
    assert call["type"] == "mcp_call" and call["approval_request_id"] == request_id and call["output"] == "5"
    assert message["content"][0]["text"] == "Tool said: 5" and len(tool_calls(mcp)) == 1
    assert kinds(events)[2:7] == ["output_item.added", "mcp_call_arguments.delta", "mcp_call_arguments.done",
                                  "mcp_call.in_progress", "mcp_call.completed"]
    # The same approval again is stale: a clear 422, nothing runs.
    reply = engine.post("/v1/responses", answer(engine, events[-1]["response"]["id"], request_id, True, guarded),
                        headers=AUTH)
    assert reply.status == 422 and "already answered" in reply.json()["error"]["message"]
    assert len(tool_calls(mcp)) == 1


def test_approval_denied(engine, mcp):
    guarded = calc(require_approval={"always": ["add"], "never": ["echo"]})
    previous, request_id = ask_approval(engine, mcp, guarded)
    events = stream(engine, answer(engine, previous, request_id, False, guarded))
    assert [item["type"] for item in items(events)] == ["message"]
    assert items(events)[0]["content"][0]["text"] == "Tool said: The user denied this call of the tool."
    assert tool_calls(mcp) == []
    # `never` names a tool that runs without asking.
    events = stream(engine, {"input": "Use the echo tool", "tools": [guarded]})
    assert [item["type"] for item in items(events)] == ["mcp_list_tools", "mcp_call", "message"]


def test_an_unknown_approval_id_is_a_422(engine, chat_upstream):
    first = engine.post("/v1/responses", {"input": "hello"}, headers=AUTH).ok()
    chat_upstream.clear()
    reply = engine.post("/v1/responses", answer(engine, first["id"], "mcpr_nope", True, calc()), headers=AUTH)
    assert reply.status == 422 and reply.json()["error"]["param"] == "input"
    assert "mcpr_nope" in reply.json()["error"]["message"] and chat_upstream.requests(CHAT) == []


def test_a_round_with_a_client_function_call_pauses_whole(engine, mcp):
    """Spec 002's mixed round: the server-side call is not run, its item says so."""
    clear_recorded_requests(mcp)
    events = stream(engine, {"input": "parallel-calls use the tools",
                             "tools": [calc(allowed_tools=["echo"]), WEATHER_TOOL]})
    # (The chat request lists the function tools first, the listed MCP tools after.)
    assert [item["type"] for item in items(events)] == ["mcp_list_tools", "function_call", "mcp_call"]
    call = items(events)[2]
    assert call["status"] == "failed" and "spec 002" in call["error"]["content"][0]["text"]
    assert events[-1]["type"] == "response.completed"
    assert not any('"tools/call"' in r["body"] for r in recorded_requests(mcp))
