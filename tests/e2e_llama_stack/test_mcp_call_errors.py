"""Failed MCP calls run by a REAL Llama Stack 0.7.3 against the real test MCP server in
`--faulty` mode, through `gateway serve`: Llama Stack reports the call's `error` as a
string (tests/fixtures/llama-stack-0.7.3/README.md, "Failing MCP calls"); the client
gets the `openai` error object in the JSON body, the stream and `GET /v1/responses/{id}`."""

from __future__ import annotations

import pytest
from openai.types.responses.response_output_item import McpCall

from tests.support.flows import chained_mcp_call_errors, failed_mcp_call
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK, start_mcp_server
from tests.support.openai_shapes import replay_through_sdk, validate_response

from .conftest import DEFAULT_MODEL
from .helpers import checked, kinds

pytestmark = pytest.mark.llama_stack

TOOL_ERROR = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "Error (code 1): None"}]}
PROTOCOL_ERROR = {"type": "mcp_protocol_error", "code": 0, "message": "reject refused: Use the reject tool"}
# What the model was told, so what it said: the tool's own text (explode) or the
# JSON-RPC error's message (reject).
CASES = {"explode": (TOOL_ERROR, "Tool said: Error executing tool explode: explode refused: Use the explode tool"),
         "reject": (PROTOCOL_ERROR, "Tool said: reject refused: Use the reject tool")}


def faulty_tools(server) -> list[dict]:
    return [{"type": "mcp", "server_label": "faulty", "server_url": server.url, "require_approval": "never"}]


@pytest.fixture(scope="module")
def faulty(chain, tmp_path_factory):
    server = start_mcp_server(tmp_path_factory.mktemp("mcp-faulty"), faulty=True)
    yield server
    server.stop()


@pytest.mark.parametrize("tool", ["explode", "reject"])
def test_json_body_and_get_carry_the_error_object(chain, faulty, tool):
    expected, said = CASES[tool]
    reply = chain.gateway.post("/v1/responses", {"input": f"Use the {tool} tool", "tools": faulty_tools(faulty)})
    assert reply.status == 200, reply.body
    data = reply.json()
    validate_response(data)
    assert [item["type"] for item in data["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    call = data["output"][1]
    assert (call["name"], call["error"], call["output"]) == (tool, expected, None)
    assert data["status"] == "completed" and data["output_text"] == said
    fetched = chain.gateway.get(f"/v1/responses/{data['id']}").json()
    validate_response(fetched)
    assert fetched["output"] == data["output"]


@pytest.mark.parametrize("tool", ["explode", "reject"])
def test_stream_carries_the_error_object(chain, faulty, tool):
    expected, said = CASES[tool]
    status, frames = chain.gateway.stream({"input": f"Use the {tool} tool", "tools": faulty_tools(faulty)})
    assert status == 200
    events = checked(frames)
    failed_mcp_call(events, expected)
    final = replay_through_sdk(events)
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert final.output[1].error.type == expected["type"] and final.output_text == said
    assert events[-1]["response"]["output"][1]["error"] == expected


def test_sdk_reads_the_error(chain, faulty):
    response = chain.gateway.client().responses.create(input="Use the reject tool", tools=faulty_tools(faulty))
    call = response.output[1]
    assert call.type == "mcp_call" and call.error.type == "mcp_protocol_error"
    assert call.error.message == PROTOCOL_ERROR["message"]


def test_input_items_replaying_a_failed_call_carry_the_error_object(chain, faulty, gateway_factory):
    # Chained by previous_response_id (the gateway keeps the conversation): Llama Stack's
    # input_items then replay the earlier turn's output. A turn addressed by an upstream
    # conversation lists only its own input.
    chaining = gateway_factory(chain.stack.url, inference=DEFAULT_MODEL,
                               llama_stack={"url": chain.stack.url, "conversations": "gateway"},
                               client_tools=CLIENT_MCP_ON_LOOPBACK)
    calls = chained_mcp_call_errors(chaining, {"input": "Use the explode tool", "tools": faulty_tools(faulty)})
    assert [call["error"] for call in calls] == [TOOL_ERROR]
    McpCall.model_validate(calls[0])


def test_mcp_server_gone_mid_call_ends_the_stream_failed(chain, gateway_factory, tmp_path_factory):
    """Llama Stack never answers once the MCP server died mid-call; the gateway's
    `llama_stack.timeout` ends the stream with `response.failed`."""
    doomed = start_mcp_server(tmp_path_factory.mktemp("mcp-vanish"), faulty=True)
    try:
        impatient = gateway_factory(chain.stack.url, inference=DEFAULT_MODEL,
                                    llama_stack={"url": chain.stack.url, "max_retries": 0, "timeout": 5},
                                    client_tools=CLIENT_MCP_ON_LOOPBACK)
        status, frames = impatient.stream({"input": "Use the vanish tool", "tools": faulty_tools(doomed)})
    finally:
        doomed.stop()
    assert status == 200
    events = checked(frames)
    assert kinds(events)[-2:] == ["mcp_call.in_progress", "failed"]
    replay_through_sdk(events)
