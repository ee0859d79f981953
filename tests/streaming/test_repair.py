"""The repairer as a table of events in → events out (no I/O)."""

from __future__ import annotations

import copy

import orjson
import pytest
from openai.types.responses import Response

from gateway.streaming.events import Event
from gateway.streaming.repair import StreamRepairer, repair_input_items, repair_item, repair_response

RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "output": [],
            "status": "in_progress", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def ev(**data) -> Event:
    return Event.build(data)


def run(*events: Event, close: bool = True) -> list[dict]:
    repairer = StreamRepairer()
    out = [e for event in events for e in repairer.feed(event)]
    if close:
        out += repairer.close()
    return [e.data for e in out]


def types(out: list[dict]) -> list[str]:
    return [e["type"] for e in out]


def created() -> Event:
    return ev(type="response.created", response=dict(RESPONSE), sequence_number=0)


def test_typed_openai_error_event_becomes_response_failed():
    out = run(created(), ev(type="error", code="x", message="bad", param=None, sequence_number=1))
    assert types(out) == ["response.created", "response.failed"]
    assert out[-1]["response"]["error"] == {"code": "server_error", "message": "bad"}


def test_failed_response_reuses_the_last_snapshot():
    out = run(created(), ev(error={"message": "boom", "code": "500"}))
    assert out[-1]["response"]["id"] == "resp_1" and out[-1]["response"]["status"] == "failed"


def test_fail_without_any_response_builds_a_valid_one():
    repairer = StreamRepairer()
    failed = repairer.fail("upstream idle timeout")[0].data["response"]
    assert failed["status"] == "failed" and failed["output"] == [] and failed["error"]["message"]
    assert repairer.fail("again") == [] and repairer.close() == []


def test_lifecycle_event_without_response_object_fails_the_stream():
    out = run(created(), ev(type="response.in_progress", sequence_number=1))
    assert types(out) == ["response.created", "response.failed"]


def test_function_call_arguments_pass_through_unparsed():
    raw = b'{"delta":"{\\"a\\"","item_id":"fc_1","output_index":0,"sequence_number":3,' \
          b'"type":"response.function_call_arguments.delta"}'
    repairer = StreamRepairer()
    repairer.feed(created())
    repairer.feed(ev(type="response.output_item.added", output_index=0, sequence_number=2,
                     item={"id": "fc_1", "type": "function_call", "call_id": "c", "name": "f", "arguments": ""}))
    delta = Event("response.function_call_arguments.delta", raw)
    assert repairer.feed(delta) == [delta] and not delta.parsed


def test_arguments_of_an_item_never_announced_are_dropped():
    out = run(created(), ev(type="response.function_call_arguments.delta", item_id="fc_x", output_index=0,
                            delta="{}", sequence_number=1))
    assert types(out) == ["response.created", "response.failed"]


def test_progress_without_item_and_nothing_open_is_dropped():
    out = run(created(), ev(type="response.mcp_call.completed", sequence_number=1), close=False)
    assert types(out) == ["response.created"]


def test_output_text_done_is_not_duplicated():
    part = {"type": "output_text", "text": "hi", "annotations": []}
    out = run(created(), ev(type="response.output_text.done", item_id="m", output_index=0, content_index=0,
                            text="hi", sequence_number=1),
              ev(type="response.content_part.done", item_id="m", output_index=0, content_index=0, part=part,
                 sequence_number=2), close=False)
    assert types(out).count("response.output_text.done") == 1


def test_refusal_part_gets_no_text_done():
    part = {"type": "refusal", "refusal": "no"}
    out = run(created(), ev(type="response.content_part.done", item_id="m", output_index=0, content_index=0,
                            part=part, sequence_number=1), close=False)
    assert types(out) == ["response.created", "response.content_part.done"]


def test_repair_response_fills_usage_and_error_code():
    response = repair_response({**RESPONSE, "usage": {"input_tokens": 3, "output_tokens": 4},
                                "error": {"code": "404", "message": "gone"}})
    assert response["usage"] == {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7,
                                 "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                                 "output_tokens_details": {"reasoning_tokens": 0}}
    assert response["error"]["code"] == "server_error"


def test_repair_response_echoes_the_defaults_for_a_null_setting():
    # An upstream that echoes a request's null: the Response type requires a boolean and a choice.
    response = repair_response({**RESPONSE, "parallel_tool_calls": None, "tool_choice": None})
    assert response["parallel_tool_calls"] is True and response["tool_choice"] == "auto"
    Response.model_validate(response)
    kept = repair_response({**RESPONSE, "parallel_tool_calls": False, "tool_choice": "required"})
    assert kept["parallel_tool_calls"] is False and kept["tool_choice"] == "required"


# -- an mcp_call's `error`: Llama Stack's string -> the openai McpToolCallError object ------

def tool_error(text: str) -> dict:
    return {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}


def protocol_error(message: str) -> dict:
    return {"type": "mcp_protocol_error", "code": 0, "message": message}


MCP_CALL = {"id": "fc_1", "type": "mcp_call", "arguments": "{}", "name": "explode", "server_label": "s",
            "output": None}


@pytest.mark.parametrize("item, expected", [
    ({**MCP_CALL, "error": "Error (code 1): None"}, {**MCP_CALL, "error": tool_error("Error (code 1): None")}),
    ({**MCP_CALL, "error": None}, {**MCP_CALL, "error": None}),
    (MCP_CALL, MCP_CALL),  # no `error` key: none is added
    # mcp_list_tools' error is a string in the openai types too.
    ({"id": "l", "type": "mcp_list_tools", "server_label": "s", "tools": [], "error": "unreachable"},
     {"id": "l", "type": "mcp_list_tools", "server_label": "s", "tools": [], "error": "unreachable"}),
    ({"type": "message", "role": "user", "content": "Error (code 1): None"},
     {"type": "message", "role": "user", "content": "Error (code 1): None"}),
    ("not an item", "not an item"),
])
def test_repair_item_changes_only_mcp_call_errors(item, expected):
    assert repair_item(copy.deepcopy(item)) == expected


def test_repair_response_repairs_its_output():
    response = repair_response({**RESPONSE, "status": "completed", "output": [
        {**MCP_CALL, "error": "reject refused"}, {**MCP_CALL, "id": "fc_2", "error": None, "output": "5"}]})
    assert [item["error"] for item in response["output"]] == [protocol_error("reject refused"), None]
    Response.model_validate(response)


def test_item_events_carry_the_error_object():
    failed = {**MCP_CALL, "error": "Error (code 1): None"}
    out = run(created(),
              ev(type="response.output_item.added", output_index=0, item={**MCP_CALL, "error": None}, sequence_number=1),
              ev(type="response.mcp_call.failed", sequence_number=2),
              ev(type="response.output_item.done", output_index=0, item=failed, sequence_number=3), close=False)
    assert types(out) == ["response.created", "response.output_item.added", "response.mcp_call.failed",
                          "response.output_item.done"]
    assert out[1]["item"]["error"] is None
    assert (out[2]["item_id"], out[2]["output_index"]) == ("fc_1", 0)
    assert out[3]["item"]["error"] == tool_error("Error (code 1): None")


def test_input_items_repaired_and_others_passed_through_unparsed():
    listing = {"data": [{"type": "message", "role": "user", "content": "hi", "id": None, "status": None},
                        {**MCP_CALL, "error": "Error (code 1): None"}], "object": "list"}
    repaired = orjson.loads(repair_input_items(orjson.dumps(listing)))
    assert repaired["data"][0] == listing["data"][0]
    assert repaired["data"][1]["error"] == tool_error("Error (code 1): None")
    without_call = b'{"data":[{"type":"message","role":"user","content":"no MCP call"}],"object":"list"}'
    assert repair_input_items(without_call) is without_call
    lookalike = b'{"data":[{"type":"message","role":"user","content":"mcp_call"}],"object":"list"}'
    assert repair_input_items(lookalike) == lookalike  # parsed, nothing to change
    for odd in (b'{"data": ["mcp_call"', b'["mcp_call"]'):
        assert repair_input_items(odd) is odd


def test_an_error_as_the_first_event_is_a_refusal_with_its_status():
    refused = StreamRepairer()
    out = refused.feed(Event.build({"error": {"message": "Response 'x' not found.", "code": "404"}}))
    assert refused.refusal == (404, "Response 'x' not found.") and out[0].type == "response.failed"
    odd = StreamRepairer()
    odd.feed(Event.build({"error": {"message": "who knows", "code": "teapot"}}))
    assert odd.refusal == (500, "who knows")
    begun = StreamRepairer()
    begun.feed(Event.build({"type": "response.created", "sequence_number": 0, "response": {"id": "r"}}))
    begun.feed(Event.build({"error": {"message": "Model 'm' not found.", "code": "404"}}))
    assert begun.refusal is None and begun.terminal is not None


@pytest.mark.parametrize("reason, repaired", [("length", "max_output_tokens"), ("content_filter", "content_filter"),
                                              ("max_output_tokens", "max_output_tokens"), ("weird", None)])
def test_incomplete_reason_in_openai_terms(reason, repaired):
    # Llama Stack 0.7.3 passes finish_reason through (found by the engine parity test).
    response = repair_response({"id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": reason}})
    assert response["incomplete_details"] == {"reason": repaired}


def test_a_response_the_gateway_made_is_kept_unrepaired_for_a_later_failure():
    """The local engine's `response.created`: nothing to repair (its bytes stay as the
    engine made them), but a `response.failed` built later names its response."""
    usage = {"input_tokens": 0, "output_tokens": 0, "input_tokens_details": {}}
    created = ev(type="response.created", sequence_number=0, response={**RESPONSE, "id": "resp_engine",
                                                                        "usage": usage})
    repairer = StreamRepairer()
    repairer.started(created)
    assert created.data["response"]["usage"] == {"input_tokens": 0, "output_tokens": 0, "input_tokens_details": {}}
    failed, = repairer.fail("interrupted")
    assert failed.data["response"]["id"] == "resp_engine" and failed.data["response"]["status"] == "failed"
