"""Failed MCP calls through `gateway serve` in front of the scripted upstream, which
reproduces what a real Llama Stack 0.7.3 sent (tests/fixtures/llama-stack-0.7.3/README.md,
"Failing MCP calls"): the `mcp_call` item's `error` is a string, and the client gets the
`openai` error object in the JSON body, the stream, `GET /v1/responses/{id}` and
`input_items`."""

from __future__ import annotations

import json

import pytest
from openai.types.responses.response_output_item import McpCall

from tests.conftest import FIXTURES
from tests.devserver.helpers import normalise
from tests.support.flows import chained_mcp_call_errors, checked, failed_mcp_call, kinds
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK
from tests.support.openai_shapes import replay_through_sdk, validate_response

FAULTY = [{"type": "mcp", "server_label": "faulty", "server_url": "http://127.0.0.1:9/faulty/mcp",
           "require_approval": "never"}]
TOOL_ERROR = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "Error (code 1): None"}]}
PROTOCOL_ERROR = {"type": "mcp_protocol_error", "code": 0, "message": "reject refused: Use the reject tool"}
CASES = {"explode": ("mcp-call-error", TOOL_ERROR), "reject": ("mcp-protocol-error", PROTOCOL_ERROR)}


def recorded_request(case: str) -> dict:
    """The request as recorded, its MCP server (a port of the recording run) made FAULTY."""
    index = json.loads((FIXTURES / "index-mcp-call-errors.json").read_text())
    request = next(entry["request_json"] for entry in index if entry["case"] == case)
    return {**request, "tools": FAULTY} if "tools" in request else request


def _sorted_schemas(value):
    """The recorded MCP server (mcp 2.x) orders input_schema keys unlike the stand-in's."""
    if isinstance(value, dict):
        return {key: json.dumps(item, sort_keys=True) if key == "input_schema" else _sorted_schemas(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_sorted_schemas(item) for item in value]
    return value


def comparable(text: str) -> list[str]:
    """A body, or a stream's events, with ids and times as placeholders, one per line."""
    blocks = text.split("\n\n") if text.startswith("data: ") else [text]
    events = [json.loads(block.removeprefix("data: ")) for block in blocks if block.strip()]
    return normalise("\n".join(json.dumps(_sorted_schemas(event), separators=(",", ":"))
                                for event in events)).split("\n")


@pytest.mark.parametrize("case", ["responses-mcp-call-error", "responses-mcp-call-error-stream",
                                  "responses-mcp-protocol-error", "responses-mcp-protocol-error-stream"])
def test_scripted_upstream_sends_what_llama_stack_sent(upstream, case):
    """The scripted e2e path meets the same quirk as the real one (ids and times aside)."""
    reply = upstream.post("/v1/responses", recorded_request(case))
    assert reply.status == 200
    suffix = ".sse" if case.endswith("-stream") else ".json"
    assert comparable(reply.body.decode()) == comparable((FIXTURES / (case + suffix)).read_text())


def test_scripted_upstream_replays_the_failed_call_in_input_items(upstream):
    """A later turn's input_items carry the failed call as recorded. (Its usage differs:
    Llama Stack replays the tool's own text to the model, the stand-in the item's error.)"""
    first = upstream.post("/v1/responses", recorded_request("responses-mcp-call-error")).json()
    second = upstream.post("/v1/responses", {**recorded_request("responses-after-mcp-call-error"),
                                             "previous_response_id": first["id"]}).json()
    listing = upstream.get(f"/v1/responses/{second['id']}/input_items")
    recorded = (FIXTURES / "responses-input-items-mcp-call-error.json").read_text()
    assert comparable(listing.body.decode()) == comparable(recorded)


@pytest.mark.parametrize("tool", ["explode", "reject"])
def test_json_body_and_get_carry_the_error_object(gateway, tool):
    _, expected = CASES[tool]
    reply = gateway.post("/v1/responses", {"input": f"Use the {tool} tool", "tools": FAULTY})
    assert reply.status == 200, reply.body
    data = reply.json()
    response = validate_response(data)
    assert [item["type"] for item in data["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    assert data["output"][1]["error"] == expected and data["output"][1]["output"] is None
    assert response.output[1].error.type == expected["type"]
    fetched = gateway.get(f"/v1/responses/{data['id']}").json()
    validate_response(fetched)
    assert fetched["output"] == data["output"]


@pytest.mark.parametrize("tool", ["explode", "reject"])
def test_stream_carries_the_error_object(gateway, tool):
    _, expected = CASES[tool]
    status, frames = gateway.stream({"input": f"Use the {tool} tool", "tools": FAULTY})
    assert status == 200
    events = checked(frames)
    assert failed_mcp_call(events, expected) == 1
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["output"][1]["error"] == expected
    final = replay_through_sdk(events)
    assert final.output[1].type == "mcp_call" and final.output[1].error.type == expected["type"]


def test_input_items_replaying_a_failed_call_carry_the_error_object(gateway_factory, upstream):
    # Chained by previous_response_id (the gateway keeps the conversation), as with a
    # real Llama Stack, whose input_items then replay the earlier turn's output.
    chaining = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "conversations": "gateway"},
                               client_tools=CLIENT_MCP_ON_LOOPBACK)
    calls = chained_mcp_call_errors(chaining, {"input": "Use the explode tool", "tools": FAULTY})
    assert [call["error"] for call in calls] == [TOOL_ERROR]
    McpCall.model_validate(calls[0])


@pytest.fixture(scope="module")
def impatient(gateway_factory, upstream):
    """Gives up on a silent upstream after 1 s: an MCP server gone mid-call never answers."""
    return gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "timeout": 1},
                           client_tools=CLIENT_MCP_ON_LOOPBACK)


def test_mcp_server_gone_mid_call_ends_the_stream_failed(impatient):
    status, frames = impatient.stream({"input": "Use the vanish tool", "tools": FAULTY})
    assert status == 200
    events = checked(frames)
    assert kinds(events)[-2:] == ["mcp_call.in_progress", "failed"]
    replay_through_sdk(events)


def test_mcp_server_gone_mid_call_is_a_503(impatient):
    reply = impatient.post("/v1/responses", {"input": "Use the vanish tool", "tools": FAULTY})
    assert reply.status == 503, reply.body
    assert reply.json()["error"]["code"] == "upstream_unavailable"
