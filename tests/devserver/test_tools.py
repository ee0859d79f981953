"""MCP (simulated) and function tools through the Llama Stack stand-in."""

from __future__ import annotations

import json

from .helpers import (CHAT, check_events_with_openai_types, check_sequence, fixture_request,
                      fixture_text, normalise, sse_events, validate_response)


async def _approval_request(client):
    resp = await client.post("/v1/responses",
                             json=fixture_request("responses-mcp-approval-request"))
    body = await resp.json()
    assert body["output"][-1]["type"] == "mcp_approval_request"
    return body


async def test_mcp_approval_approved_runs_the_call(client):
    first = await _approval_request(client)
    request = fixture_request("responses-mcp-approval-response")
    request = {**request, "previous_response_id": first["id"],
               "input": [{**request["input"][0],
                          "approval_request_id": first["output"][-1]["id"]}]}
    resp = await client.post("/v1/responses", json=request)
    assert normalise(await resp.text()) == normalise(
        fixture_text("responses-mcp-approval-response.json").strip())


async def test_mcp_approval_denied_answers_without_calling(client):
    first = await _approval_request(client)
    request = fixture_request("responses-mcp-approval-denied")
    request = {**request, "previous_response_id": first["id"],
               "input": [{**request["input"][0],
                          "approval_request_id": first["output"][-1]["id"]}]}
    resp = await client.post("/v1/responses", json=request)
    body_text = await resp.text()
    assert normalise(body_text) == normalise(
        fixture_text("responses-mcp-approval-denied.json").strip())
    assert [i["type"] for i in json.loads(body_text)["output"]] == ["mcp_list_tools"]


async def test_mcp_approval_stream_round_trip(client):
    resp = await client.post("/v1/responses",
                             json=fixture_request("responses-mcp-approval-request-stream"))
    events = sse_events(await resp.text())
    check_sequence(events, gaps=1)
    request_item = events[-1]["response"]["output"][-1]
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "stream": True, "previous_response_id": events[-1]["response"]["id"],
        "tools": fixture_request("responses-mcp-approval-request-stream")["tools"],
        "input": [{"type": "mcp_approval_response", "approval_request_id": request_item["id"],
                   "approve": True}]})
    events = sse_events(await resp.text())
    final = events[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    assert final["output"][1]["output"] == "5"
    check_events_with_openai_types(events)


async def test_mcp_echo_tool_and_allowed_tools(client):
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "use echo to repeat this",
        "tools": [{"type": "mcp", "server_label": "util", "server_url": "http://x/mcp",
                   "allowed_tools": ["echo"]}]})
    body = await resp.json()
    listing, call, message = body["output"]
    assert [t["name"] for t in listing["tools"]] == ["echo"]
    assert call["name"] == "echo" and call["output"] == "use echo to repeat this"
    assert message["content"][0]["text"] == "Tool said: use echo to repeat this"
    assert body["tools"] == [{"type": "mcp", "server_label": "util", "allowed_tools": ["echo"]}]
    validate_response(body)


async def test_mcp_add_uses_numbers_from_the_text(client):
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "add 40 and 2",
        "tools": [{"type": "mcp", "server_label": "calc", "server_url": "http://x/mcp"}]})
    body = await resp.json()
    assert body["output"][1]["arguments"] == '{"a": 40, "b": 2}'
    assert body["output"][1]["output"] == "42"


async def test_mcp_definitions_are_recorded_with_headers(client):
    tool = {"type": "mcp", "server_label": "calc", "server_url": "http://127.0.0.1:1/mcp",
            "headers": {"X-Api-Key": "k"}, "authorization": "tok", "require_approval": "never"}
    await client.post("/v1/responses", json={"model": CHAT, "input": "use add", "tools": [tool]})
    assert await (await client.get("/_scripted/mcp")).json() == [tool]
    await client.delete("/_scripted/requests")
    assert await (await client.get("/_scripted/mcp")).json() == []


async def test_mcp_unreachable_server(client):
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "use add",
        "tools": [{"type": "mcp", "server_label": "dead",
                   "server_url": "http://unreachable.invalid/mcp"}]})
    assert resp.status == 502
    assert (await resp.json())["error"]["message"].startswith("Failed to connect to MCP server")


async def test_mcp_stream_event_types(client):
    resp = await client.post("/v1/responses", json=fixture_request("responses-mcp-stream"))
    events = sse_events(await resp.text())
    types = [e["type"] for e in events]
    assert types[2:11] == [
        "response.mcp_list_tools.in_progress", "response.output_item.added",
        "response.mcp_list_tools.completed", "response.output_item.done",
        "response.function_call_arguments.delta", "response.mcp_call.arguments.done",
        "response.output_item.added", "response.mcp_call.in_progress",
        "response.mcp_call.completed"]
    assert set(events[2]) == {"sequence_number", "type"}
    assert set(events[10]) == {"sequence_number", "type"}
    assert events[5]["sequence_number"] == 5 and events[6]["sequence_number"] == 7  # the gap
    check_sequence(events, gaps=1)
    assert "response.output_text.done" not in types


async def test_function_tool_with_previous_function_call_output_stream(client):
    tools = fixture_request("responses-function-tool")["tools"]
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "call the weather tool for Rome", "tools": tools,
        "stream": True})
    events = sse_events(await resp.text())
    check_events_with_openai_types(events)
    final = events[-1]["response"]
    call = final["output"][0]
    assert call["type"] == "function_call" and call["arguments"] == '{"location": "Rome"}'
    assert final["tools"][0]["strict"] is None
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "previous_response_id": final["id"], "tools": tools,
        "input": [{"type": "function_call_output", "call_id": call["call_id"],
                   "output": "sunny"}]})
    body = await resp.json()
    assert body["output"][0]["content"][0]["text"] == "Tool said: sunny"
    assert body["previous_response_id"] is None  # quirk: never echoed
    items = (await (await client.get(f"/v1/responses/{body['id']}/input_items")).json())["data"]
    assert [i["type"] for i in items] == ["function_call_output", "function_call", "message"]


async def test_tool_choice_none_disables_tools(client):
    tools = fixture_request("responses-function-tool")["tools"]
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "use the tool", "tools": tools, "tool_choice": "none"})
    body = await resp.json()
    assert body["output"][0]["type"] == "message"
    assert body["tool_choice"] == "none"


async def test_parallel_calls_call_every_function_tool_in_one_turn(client):
    tools = [{"type": "function", "name": name, "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}
        for name in ("first", "second")]
    for stream in (False, True):
        resp = await client.post("/v1/responses", json={
            "model": CHAT, "stream": stream, "tools": tools, "input": "parallel-calls: use the tools with 7"})
        if stream:
            events = sse_events(await resp.text())
            check_events_with_openai_types(events)
            output = events[-1]["response"]["output"]
        else:
            output = (await resp.json())["output"]
        assert [(i["type"], i["name"], json.loads(i["arguments"])) for i in output] == [
            ("function_call", "first", {"a": 7}), ("function_call", "second", {"a": 7})]
        assert len({i["call_id"] for i in output}) == 2 and len({i["id"] for i in output}) == 2
