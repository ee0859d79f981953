"""Tools the operator configured, injected by the gateway when a request omits `tools`,
run by a real Llama Stack 0.7.3: MCP servers (`mcp_servers`, a real MCP server that
records the headers it receives) and RAG stores (`byok_rag`, a vector store made on
Llama Stack)."""

from __future__ import annotations

import json

import pytest

from tests.support.mcp_server import clear_recorded_requests, recorded_requests
from tests.support.openai_shapes import replay_through_sdk, validate_response

from .conftest import MCP_TOKEN
from .helpers import ADD_PROMPT, CONV, checked, conversation_of, kinds

pytestmark = pytest.mark.llama_stack

TENANT = {"X-Tenant": "acme"}
FILE_SEARCH_PROMPT = "search the handbook for the Falcon launch code"


def probe(record) -> bool:
    """The gateway's own OAuth probe (`turns/tools.py`, as LCORE): an `initialize` before
    the turn that carries the credential only; not Llama Stack's call."""
    return "gateway-oauth-probe" in (record["body"] or "")


def mcp_methods(mcp) -> list[str]:
    """The JSON-RPC methods Llama Stack sent the MCP server, in order."""
    methods = []
    for record in recorded_requests(mcp):
        if record["method"] == "POST" and record["body"] and not probe(record):
            methods.append(json.loads(record["body"]).get("method"))
    return methods


def assert_headers_arrived(mcp) -> None:
    records = [record for record in recorded_requests(mcp) if not probe(record)]
    assert records, "Llama Stack never reached the MCP server"
    for record in records:
        assert record["headers"].get("authorization") == f"Bearer {MCP_TOKEN}", record
        assert record["headers"].get("x-tenant") == "acme", record


def test_mcp_server_from_config(chain):
    clear_recorded_requests(chain.mcp)
    reply = chain.mcp_gateway.post("/v1/responses", {"input": ADD_PROMPT}, headers=TENANT)
    assert reply.status == 200, reply.body
    data = reply.json()
    validate_response(data)
    assert [item["type"] for item in data["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    listed, call, _ = data["output"]
    assert listed["server_label"] == "calc" and {"add", "echo"} <= {tool["name"] for tool in listed["tools"]}
    assert call["server_label"] == "calc" and call["name"] == "add" and call["error"] is None
    arguments = json.loads(call["arguments"])
    total = str(arguments["a"] + arguments["b"])
    assert call["output"] == total
    assert data["output_text"] == f"Tool said: {total}"
    assert CONV.match(data["conversation"])
    # The configured credential (read from a file) and the client's X-Tenant arrived.
    assert "tools/call" in mcp_methods(chain.mcp)
    assert_headers_arrived(chain.mcp)
    fetched = chain.mcp_gateway.get(f"/v1/responses/{data['id']}").json()
    validate_response(fetched)
    assert fetched["output"] == data["output"] and fetched["conversation"] == data["conversation"]


def test_mcp_server_from_config_through_the_sdk(chain):
    client = chain.mcp_gateway.client(default_headers=TENANT)
    response = client.responses.create(input=ADD_PROMPT)
    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert response.output_text == f"Tool said: {response.output[1].output}"


def test_mcp_server_from_config_streamed(chain):
    clear_recorded_requests(chain.mcp)
    status, frames = chain.mcp_gateway.stream({"input": ADD_PROMPT}, headers=TENANT)
    assert status == 200
    events = checked(frames)
    names = kinds(events)
    # Llama Stack streams the arguments before the item, as function-call events; the
    # client sees OpenAI's MCP argument events after the mcp_call is announced.
    assert "function_call_arguments.delta" not in names and "mcp_call.arguments.done" not in names
    call_added = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.added"
                      and e["item"]["type"] == "mcp_call")
    call_id = events[call_added]["item"]["id"]
    argument_events = [i for i, e in enumerate(events) if e["type"].startswith("response.mcp_call_arguments")]
    assert argument_events and min(argument_events) > call_added
    assert names[argument_events[-1]] == "mcp_call_arguments.done"
    deltas = "".join(events[i]["delta"] for i in argument_events[:-1])
    assert deltas == events[argument_events[-1]]["arguments"]
    assert all(events[i]["item_id"] == call_id for i in argument_events)
    for event in events:
        if event["type"].startswith(("response.mcp_call", "response.mcp_list_tools")):
            assert isinstance(event.get("item_id"), str) and event["item_id"], event
            assert isinstance(event.get("output_index"), int), event
    assert "mcp_call.completed" in names and "mcp_list_tools.completed" in names
    final = replay_through_sdk(events)
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    arguments = json.loads(deltas)
    assert final.output[1].output == str(arguments["a"] + arguments["b"])
    completed = events[-1]["response"]
    assert completed["output_text"] == f"Tool said: {final.output[1].output}"
    assert completed["available_quotas"] == {} and CONV.match(completed["conversation"])
    assert_headers_arrived(chain.mcp)


def test_mcp_require_approval_always_asks_first(chain):
    clear_recorded_requests(chain.mcp)
    client = chain.approval_gateway.client(default_headers=TENANT)
    first = client.responses.create(input=ADD_PROMPT)
    assert [item.type for item in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    request = first.output[-1]
    assert request.server_label == "calc" and request.name == "add"
    assert json.loads(request.arguments).keys() == {"a", "b"}
    assert first.output_text == ""
    methods = mcp_methods(chain.mcp)
    assert "tools/list" in methods and "tools/call" not in methods  # nothing ran before the approval
    assert_headers_arrived(chain.mcp)


def test_mcp_approval_response_runs_the_call(chain):
    client = chain.approval_gateway.client(default_headers=TENANT)
    first = client.responses.create(input=ADD_PROMPT)
    request = first.output[-1]
    assert request.type == "mcp_approval_request"
    clear_recorded_requests(chain.mcp)
    second = client.responses.create(previous_response_id=first.id, input=[
        {"type": "mcp_approval_response", "approve": True, "approval_request_id": request.id}])
    assert conversation_of(second) == conversation_of(first)
    assert second.previous_response_id == first.id
    # Actual: Llama Stack never sees the approval (no approval request in the turn's
    # input when it is addressed by `conversation`), replays the user message and asks
    # for approval again: output is [mcp_list_tools, mcp_approval_request].
    assert [item.type for item in second.output if item.type != "mcp_list_tools"] == ["mcp_call", "message"]
    call = next(item for item in second.output if item.type == "mcp_call")
    assert call.name == "add" and call.error is None
    arguments = json.loads(call.arguments)
    assert call.output == str(arguments["a"] + arguments["b"])
    assert second.output_text == f"Tool said: {call.output}"
    assert "tools/call" in mcp_methods(chain.mcp)
    assert_headers_arrived(chain.mcp)


def test_mcp_require_approval_always_streamed(chain):
    status, frames = chain.approval_gateway.stream({"input": ADD_PROMPT}, headers=TENANT)
    assert status == 200
    events = checked(frames)
    assert not any("arguments" in name for name in kinds(events))
    final = replay_through_sdk(events)
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_approval_request"]


def test_file_search_from_byok_rag(handbook):
    reply = handbook.gateway.post("/v1/responses", {"input": FILE_SEARCH_PROMPT,
                                                    "include": ["file_search_call.results"]})
    assert reply.status == 200, reply.body
    data = reply.json()
    validate_response(data)
    assert [item["type"] for item in data["output"]] == ["file_search_call", "message"]
    search = data["output"][0]
    assert search["status"] == "completed"
    assert search["queries"] == [FILE_SEARCH_PROMPT]
    assert search["results"], "file_search found nothing in the configured store"
    assert {result["file_id"] for result in search["results"]} == {handbook.file_id}
    assert "7-alpha-9" in search["results"][0]["text"]
    assert data["output_text"].startswith("Tool said: ")
    assert handbook.file_id in data["output_text"]
    assert CONV.match(data["conversation"])


def test_file_search_by_rag_id_in_explicit_tools(handbook):
    """A client may name a configured store by its rag_id; Llama Stack gets the store id."""
    tools = [{"type": "file_search", "vector_store_ids": ["handbook"]}]
    response = handbook.gateway.client().responses.create(input=FILE_SEARCH_PROMPT, tools=tools,
                                                          include=["file_search_call.results"])
    search = response.output[0]
    assert search.type == "file_search_call" and search.results
    assert search.results[0].file_id == handbook.file_id
    assert response.tools[0].vector_store_ids == [handbook.vector_store_id]


def test_file_search_from_byok_rag_streamed(handbook):
    status, frames = handbook.gateway.stream({"input": FILE_SEARCH_PROMPT})
    assert status == 200
    events = checked(frames)
    names = kinds(events)
    assert not any("arguments" in name for name in names)
    assert [n for n in names if n.startswith("file_search_call.")] == [
        "file_search_call.in_progress", "file_search_call.searching", "file_search_call.completed"]
    added = next(e for e in events if e["type"] == "response.output_item.added"
                 and e["item"]["type"] == "file_search_call")
    assert added["item"]["queries"] == [FILE_SEARCH_PROMPT]
    final = replay_through_sdk(events)
    search = final.output[0]
    assert search.type == "file_search_call" and search.queries == [FILE_SEARCH_PROMPT]
    assert search.results and search.results[0].file_id == handbook.file_id
    assert "7-alpha-9" in search.results[0].text
    assert final.output[1].type == "message"
    assert events[-1]["response"]["output_text"] == final.output_text
