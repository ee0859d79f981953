"""Replay the recorded Llama Stack 0.7.3 streams through the repair → enrich → frame
pipeline and show the repaired stream for each quirk."""

from __future__ import annotations

import orjson
import pytest
from openai.types.responses.response_output_item import McpCall

from gateway.streaming.repair import repair_input_items, repair_response
from tests.streaming.streams import CAPTURES, CONVERSATION, rewrite_bytes
from tests.support.openai_shapes import replay_through_sdk, validate_event, validate_response

# The /v1/responses streams (the chat-completions capture is the devserver's, another dialect).
RESPONSE_STREAMS = sorted(p.name for p in CAPTURES.glob("*.sse") if not p.name.startswith("chat-"))


def rewrite(raw: bytes, chunk: int = 997) -> list[dict]:
    body = rewrite_bytes(raw, chunk)
    assert body.endswith(b"\n\ndata: [DONE]\n\n")
    out = []
    for frame in body.split(b"\n\n")[:-2]:
        head, data = frame.split(b"\n")
        event = orjson.loads(data.removeprefix(b"data: "))
        assert head == b"event: " + event["type"].encode()
        out.append(event)
    return out


def kinds(events: list[dict]) -> list[str]:
    return [event["type"].removeprefix("response.") for event in events]


def capture(name: str) -> bytes:
    return (CAPTURES / name).read_bytes()


@pytest.mark.parametrize("name", RESPONSE_STREAMS)
@pytest.mark.parametrize("chunk", [1, 13, 997, 1 << 20])
def test_every_capture_becomes_a_valid_stream(name, chunk):
    events = rewrite(capture(name), chunk)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    for event in events:
        validate_event(event)
    assert events[-1]["type"] in {"response.completed", "response.failed"}
    for event in events:
        if "response" in event:
            assert event["response"]["conversation"] == CONVERSATION
    assert events[-1]["response"]["available_quotas"] == {"UserQuotaLimiter": 7}
    in_progress = [e for e in events if e["type"] == "response.in_progress"]
    assert all(e["response"]["available_quotas"] == {} and e["response"]["output_text"] == "" for e in in_progress)
    replay_through_sdk(events)


def test_text_gains_output_text_done_before_content_part_done():
    events = rewrite(capture("responses-create-text-stream.sse"))
    assert kinds(events)[-4:] == ["output_text.done", "content_part.done", "output_item.done", "completed"]
    done = events[-4]
    assert done["text"] == "Scripted reply (turn 1, 1 messages): Hello there, streaming"
    assert done["item_id"] == events[-3]["item_id"] and done["output_index"] == 0
    assert events[-1]["response"]["output_text"] == done["text"]
    assert events[-1]["response"]["usage"]["input_tokens_details"]["cache_write_tokens"] == 0


def test_mcp_arguments_follow_their_item_under_mcp_names():
    events = rewrite(capture("responses-mcp-stream.sse"))
    assert kinds(events)[:12] == [
        "created", "in_progress",
        "output_item.added", "mcp_list_tools.in_progress", "mcp_list_tools.completed", "output_item.done",
        "output_item.added", "mcp_call_arguments.delta", "mcp_call_arguments.done", "mcp_call.in_progress",
        "mcp_call.completed", "output_item.done"]
    call_id = events[6]["item"]["id"]
    assert events[7] == {"type": "response.mcp_call_arguments.delta", "item_id": call_id, "output_index": 1,
                         "delta": '{"a": 2, "b": 3}', "sequence_number": 7}
    assert events[8]["arguments"] == '{"a": 2, "b": 3}'
    list_id = events[2]["item"]["id"]
    assert (events[3]["item_id"], events[4]["item_id"], events[10]["item_id"]) == (list_id, list_id, call_id)


def test_mcp_approval_request_arguments_dropped():
    events = rewrite(capture("responses-mcp-approval-request-stream.sse"))
    assert not [kind for kind in kinds(events) if "arguments" in kind]
    assert events[-1]["response"]["output"][-1]["type"] == "mcp_approval_request"


def test_file_search_arguments_dropped_and_queries_parsed():
    events = rewrite(capture("responses-file-search-stream.sse"))
    assert kinds(events)[:7] == ["created", "in_progress", "output_item.added", "file_search_call.in_progress",
                                 "file_search_call.searching", "file_search_call.completed", "output_item.done"]
    assert events[2]["item"]["queries"] == ["search the handbook for the Falcon launch code"]


# What Llama Stack 0.7.3 put in the failed mcp_call's `error`, and what the client gets.
TOOL_ERROR = "Error (code 1): None"
TOOL_ERROR_OBJECT = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": TOOL_ERROR}]}
PROTOCOL_ERROR = "reject refused: Use the reject tool"
PROTOCOL_ERROR_OBJECT = {"type": "mcp_protocol_error", "code": 0, "message": PROTOCOL_ERROR}
MCP_ERRORS = {"mcp-call-error": (TOOL_ERROR, TOOL_ERROR_OBJECT),
              "mcp-protocol-error": (PROTOCOL_ERROR, PROTOCOL_ERROR_OBJECT)}


@pytest.mark.parametrize("name", ["responses-mcp-call-error.json", "responses-get-mcp-call-error.json",
                                  "responses-mcp-protocol-error.json", "responses-get-mcp-protocol-error.json"])
def test_failed_mcp_call_body_gets_the_error_object(name):
    recorded, expected = MCP_ERRORS[name.removesuffix(".json").removeprefix("responses-").removeprefix("get-")]
    body = orjson.loads(capture(name))
    call = body["output"][1]
    assert call["type"] == "mcp_call" and call["error"] == recorded  # the quirk is in the capture
    response = validate_response(repair_response(body))
    assert body["output"][1]["error"] == expected
    assert response.output[1].error.type == expected["type"] and response.output[1].output is None
    assert response.status == "completed" and response.output_text.startswith("Tool said: ")


@pytest.mark.parametrize("name", ["mcp-call-error", "mcp-protocol-error"])
def test_failed_mcp_call_stream_gets_the_error_object(name):
    recorded, expected = MCP_ERRORS[name]
    assert capture(f"responses-{name}-stream.sse").count(b'"error":' + orjson.dumps(recorded)) == 2
    events = rewrite(capture(f"responses-{name}-stream.sse"))
    call_added = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.added"
                      and e["item"]["type"] == "mcp_call")
    call_id = events[call_added]["item"]["id"]
    assert kinds(events)[call_added:call_added + 6] == [
        "output_item.added", "mcp_call_arguments.delta", "mcp_call_arguments.delta", "mcp_call_arguments.done",
        "mcp_call.in_progress", "mcp_call.failed"]
    failed, done = events[call_added + 5], events[call_added + 6]
    assert (failed["item_id"], failed["output_index"]) == (call_id, 1)
    assert done["type"] == "response.output_item.done" and done["item"]["error"] == expected
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][1]["error"] == expected
    final = replay_through_sdk(events)
    assert final.output[1].type == "mcp_call" and final.output[1].error.type == expected["type"]


def test_mcp_server_gone_mid_call_ends_failed():
    """Llama Stack sends nothing after mcp_call.in_progress; the gateway ends the stream."""
    events = rewrite(capture("err-mcp-call-unreachable-stream.sse"))
    assert kinds(events)[-3:] == ["mcp_call_arguments.done", "mcp_call.in_progress", "failed"]
    assert "without a terminal event" in events[-1]["response"]["error"]["message"]


def test_input_items_replaying_a_failed_mcp_call_get_the_error_object():
    raw = capture("responses-input-items-mcp-call-error.json")
    listing = orjson.loads(repair_input_items(raw))
    assert listing == {**orjson.loads(raw), "data": listing["data"]}
    calls = [item for item in listing["data"] if item["type"] == "mcp_call"]
    assert [call["error"] for call in calls] == [TOOL_ERROR_OBJECT]
    McpCall.model_validate(calls[0])
    others = [item for item in orjson.loads(raw)["data"] if item["type"] != "mcp_call"]
    assert [item for item in listing["data"] if item["type"] != "mcp_call"] == others


def test_untyped_error_event_becomes_response_failed():
    events = rewrite(capture("err-bad-model-stream.sse"))
    assert kinds(events) == ["created", "in_progress", "failed"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert failed["error"]["message"].startswith("Model 'no-such-model' not found")
    assert failed["id"] == events[0]["response"]["id"]


def test_stream_cut_before_terminal_ends_failed():
    raw = capture("responses-create-text-stream.sse")
    cut = raw[:raw.index(b'"type":"response.output_text.delta"') + 200]
    events = rewrite(cut)
    assert events[-1]["type"] == "response.failed"
    assert "without a terminal event" in events[-1]["response"]["error"]["message"]


def test_nothing_after_the_terminal_event():
    raw = capture("responses-create-text-stream.sse")
    events = rewrite(raw + raw)
    assert kinds(events).count("completed") == 1 and events[-1]["type"] == "response.completed"
