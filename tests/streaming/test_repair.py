"""The repairer as a table of events in → events out (no I/O)."""

from __future__ import annotations

from gateway.streaming.events import Event
from gateway.streaming.repair import StreamRepairer, repair_response

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
