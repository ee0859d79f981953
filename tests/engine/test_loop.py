"""The loop's rules (spec 002) over a scripted model and fake executors."""

from __future__ import annotations

import asyncio

import pytest

from gateway.engine.loop import Loop
from gateway.schema.errors import ApiError
from tests.engine.fakes import Executor, FakeModel, Saves, calls_round, emitter, plan, text_round
from tests.support.openai_shapes import validate_event


async def run(loop: Loop, the_plan, the_emitter=None, saves=None):
    the_emitter = the_emitter or emitter()
    events = []
    async for batch in loop.run(the_plan, the_emitter, saves or Saves()):
        events.extend(batch)
    return events


def kinds(events):
    return [event.type.removeprefix("response.") for event in events]


def check_stream(events, allow_requires_action=False):
    assert [event.data["sequence_number"] for event in events] == list(range(len(events)))
    assert kinds(events)[:2] == ["created", "in_progress"]
    assert sum(event.type in ("response.completed", "response.incomplete", "response.failed",
                              "response.requires_action") for event in events) == 1
    added = [e.data["output_index"] for e in events if e.type == "response.output_item.added"]
    done = [e.data["output_index"] for e in events if e.type == "response.output_item.done"]
    assert sorted(added) == sorted(done) == list(range(len(added)))
    for event in events:
        if event.type == "response.requires_action" and allow_requires_action:
            continue
        validate_event(event.data)


async def test_text_answer():
    model = FakeModel(text_round("hello there"))
    events = await run(Loop(model), plan())
    check_stream(events)
    assert kinds(events) == ["created", "in_progress", "output_item.added", "content_part.added",
                             "output_text.delta", "output_text.delta", "output_text.done", "content_part.done",
                             "output_item.done", "completed"]
    final = events[-1].data["response"]
    assert final["output"][0]["content"][0]["text"] == "hellothere"
    assert final["usage"]["input_tokens"] == 3 and final["usage"]["output_tokens"] == 2


async def test_client_function_call_ends_completed_by_default():
    model = FakeModel(calls_round(("call_1", "get_weather", '{"city":"Paris"}')))
    events = await run(Loop(model), plan("get_weather"))
    check_stream(events)
    final = events[-1].data["response"]
    assert events[-1].type == "response.completed"
    assert [item["type"] for item in final["output"]] == ["function_call"]
    assert final["output"][0]["arguments"] == '{"city":"Paris"}' and final["output"][0]["call_id"] == "call_1"
    assert len(model.requests) == 1


async def test_requires_action_switch():
    model = FakeModel(calls_round(("call_1", "get_weather", "{}")))
    events = await run(Loop(model), plan("get_weather", client_tool_status="requires_action"))
    check_stream(events, allow_requires_action=True)
    assert events[-1].type == "response.requires_action"
    assert events[-1].data["response"]["status"] == "requires_action"


async def test_missing_and_repeated_call_ids_get_unique_ones():
    model = FakeModel(calls_round((None, "a", "{}"), ("dup", "a", "{}"), ("dup", "a", "{}")))
    events = await run(Loop(model), plan("a"))
    ids = [item["call_id"] for item in events[-1].data["response"]["output"]]
    assert len(set(ids)) == 3 and ids[1] == "dup" and all(ids)


async def test_server_side_calls_run_concurrently_and_feed_back_in_call_order():
    # Both calls must be running at once to pass the barrier: a sequential loop hangs.
    executor = Executor({"a", "b"}, {"a": "result a", "b": "result b"}, parties=2)
    model = FakeModel(calls_round(("c1", "a", "{}"), ("c2", "b", "{}")), text_round("done"))
    events = await asyncio.wait_for(run(Loop(model, [executor]), plan("a", "b")), 10)
    check_stream(events)
    second = model.requests[1]["messages"]
    assert second[-3]["tool_calls"][0]["id"] == "c1" and second[-3]["tool_calls"][1]["id"] == "c2"
    assert second[-2:] == [{"role": "tool", "tool_call_id": "c1", "content": "result a"},
                           {"role": "tool", "tool_call_id": "c2", "content": "result b"}]
    output = events[-1].data["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call", "function_call_output",
                                                 "function_call_output", "message"]


async def test_usage_summed_across_rounds():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}"), usage=(10, 1)), text_round("ok", usage=(20, 5)))
    events = await run(Loop(model, [executor]), plan("a"))
    usage = events[-1].data["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (30, 6, 36)


async def test_executor_error_is_fed_back_and_the_loop_goes_on():
    executor = Executor({"a"}, {"a": RuntimeError("disk on fire")})
    model = FakeModel(calls_round(("c1", "a", "{}")), text_round("recovered"))
    events = await run(Loop(model, [executor]), plan("a"))
    assert events[-1].type == "response.completed"
    assert model.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1",
                                                 "content": "Error: RuntimeError: disk on fire"}
    output_item = events[-1].data["response"]["output"][1]
    assert output_item["type"] == "function_call_output" and output_item["is_error"] is True


async def test_unknown_tool_is_fed_back_never_executed():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "nope", "{}")), text_round("sorry"))
    events = await run(Loop(model, [executor]), plan("a"))
    assert executor.calls == []
    assert model.requests[1]["messages"][-1]["content"].startswith("Error: The tool 'nope' does not exist")
    assert events[-1].type == "response.completed"


async def test_tool_outside_allowed_tools_is_fed_back_never_executed():
    executor = Executor({"a", "b"})
    model = FakeModel(calls_round(("c1", "b", "{}")), text_round("ok"))
    await run(Loop(model, [executor]), plan("a", "b", allowed=frozenset({"a"})))
    assert executor.calls == []
    assert "not allowed" in model.requests[1]["messages"][-1]["content"]


async def test_client_tool_outside_allowed_tools_is_not_returned_to_the_client():
    model = FakeModel(calls_round(("c1", "b", "{}")), text_round("ok"))
    events = await run(Loop(model), plan("a", "b", allowed=frozenset({"a"})))
    assert len(model.requests) == 2 and "not allowed" in model.requests[1]["messages"][-1]["content"]
    assert events[-1].data["response"]["output"][-1]["type"] == "message"


async def test_max_tool_calls_across_the_response():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}"), ("c2", "a", "{}")), calls_round(("c3", "a", "{}")),
                      text_round("fine"))
    await run(Loop(model, [executor]), plan("a", max_tool_calls=2))
    assert [call.call_id for call in executor.calls] == ["c1", "c2"]
    assert "limit of 2 tool calls" in model.requests[2]["messages"][-1]["content"]


async def test_max_infer_iters_exhausted_is_incomplete():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}")), calls_round(("c2", "a", "{}")))
    events = await run(Loop(model, [executor]), plan("a", max_infer_iters=2))
    check_stream(events)
    assert events[-1].type == "response.incomplete" and len(model.requests) == 2


async def test_forced_tool_choice_applies_to_the_first_round_only():
    executor = Executor({"a"})
    forced = {"type": "function", "function": {"name": "a"}}
    model = FakeModel(calls_round(("c1", "a", "{}")), text_round("ok"))
    await run(Loop(model, [executor]), plan("a", tool_choice=forced))
    assert model.requests[0]["tool_choice"] == forced and model.requests[1]["tool_choice"] == "auto"


async def test_required_applies_to_the_first_round_and_none_never_loops():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}")), text_round("ok"))
    await run(Loop(model, [executor]), plan("a", tool_choice="required"))
    assert [request["tool_choice"] for request in model.requests] == ["required", "auto"]
    # none: tools are visible, a call the model makes anyway is shown, never executed.
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}")))
    events = await run(Loop(model, [executor]), plan("a", tool_choice="none"))
    assert executor.calls == [] and len(model.requests) == 1 and events[-1].type == "response.completed"


@pytest.mark.parametrize("finish, reason", [("length", "max_output_tokens"), ("content_filter", "content_filter")])
async def test_finish_reason_incomplete(finish, reason):
    events = await run(Loop(FakeModel(text_round("cut", finish=finish))), plan())
    check_stream(events)
    assert events[-1].type == "response.incomplete"
    assert events[-1].data["response"]["incomplete_details"] == {"reason": reason}


async def test_reasoning_content_becomes_a_reasoning_item():
    chunks = [{"choices": [{"index": 0, "delta": {"reasoning_content": "hmm "}}]},
              {"choices": [{"index": 0, "delta": {"reasoning_content": "yes"}}]}] + text_round("answer")
    events = await run(Loop(FakeModel(chunks)), plan())
    check_stream(events)
    assert "reasoning_text.delta" in kinds(events) and "reasoning_text.done" in kinds(events)
    output = events[-1].data["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    assert output[0]["content"] == [{"type": "reasoning_text", "text": "hmm yes"}]


async def test_saved_at_creation_after_each_round_and_at_the_end():
    saves = Saves()
    model = FakeModel(calls_round(("c1", "a", "{}")), text_round("ok"))
    await run(Loop(model, [Executor({"a"})]), plan("a"), saves=saves)
    assert saves.states == [("in_progress", 0, False), ("in_progress", 2, False), ("completed", 3, True)]


async def test_upstream_refusal_before_the_first_event_raises():
    async def refusing(request):
        raise ApiError(404, "Not found", "no such model", code="upstream_not_found")
        yield []  # pragma: no cover

    with pytest.raises(ApiError):
        await run(Loop(refusing), plan())


async def test_upstream_error_after_the_first_event_is_response_failed():
    model = FakeModel(text_round("partial")[:2] + [{"error": {"message": "overloaded"}}])
    events = await run(Loop(model), plan())
    check_stream(events)
    assert events[-1].type == "response.failed"
    assert events[-1].data["response"]["error"]["message"] == "overloaded"


async def test_cancel_stops_the_loop_and_running_tools():
    executor = Executor({"a"}, {"a": "hang"})
    model = FakeModel(calls_round(("c1", "a", "{}")), text_round("never"))
    task = asyncio.ensure_future(run(Loop(model, [executor]), plan("a")))
    await asyncio.wait_for(executor.started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert executor.cancelled == 1 and len(model.requests) == 1


async def test_text_and_calls_of_a_round_go_back_as_one_assistant_message():
    executor = Executor({"a"})
    mixed = text_round("let me check")[:-2] + calls_round(("c1", "a", "{}"))
    model = FakeModel(mixed, text_round("done"))
    events = await run(Loop(model, [executor]), plan("a"))
    check_stream(events)
    assistant = model.requests[1]["messages"][-2]
    assert assistant["content"] == "letmecheck" and assistant["tool_calls"][0]["id"] == "c1"
    assert [item["type"] for item in events[-1].data["response"]["output"]] == [
        "message", "function_call", "function_call_output", "message"]


async def test_escaped_text_pieces_are_decoded_once():
    chunks = [[b'"say \\"hi\\""', b'"\\n\\u00e9"'], {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    events = await run(Loop(FakeModel(chunks)), plan())
    check_stream(events)
    assert events[-1].data["response"]["output"][0]["content"][0]["text"] == 'say "hi"\né'


async def test_refusal_deltas_become_a_refusal_part():
    chunks = [{"choices": [{"index": 0, "delta": {"refusal": "I can't "}}]},
              {"choices": [{"index": 0, "delta": {"refusal": "help."}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    events = await run(Loop(FakeModel(chunks)), plan())
    check_stream(events)
    assert kinds(events)[2:] == ["output_item.added", "content_part.added", "refusal.delta", "refusal.delta",
                                 "refusal.done", "content_part.done", "output_item.done", "completed"]
    assert events[-1].data["response"]["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't help."}]


async def test_an_error_as_the_first_chunk_is_an_http_error():
    with pytest.raises(ApiError) as raised:
        await run(Loop(FakeModel([{"error": {"message": "model overloaded"}}])), plan())
    assert raised.value.status == 500 and raised.value.cause == "model overloaded"


async def test_each_rounds_usage_is_reported_and_every_later_round_admitted():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}"), usage=(10, 1)), calls_round(("c2", "a", "{}"), usage=(20, 2)),
                      text_round("ok", usage=(30, 3)))
    reported, asked = [], []

    async def admit(tokens: int) -> bool:
        asked.append(tokens)
        return True
    events = await run(Loop(model, [executor]), plan("a", round_ended=reported.append, admit_round=admit))
    assert events[-1].type == "response.completed"
    assert [(usage["input_tokens"], usage["output_tokens"]) for usage in reported] == [(10, 1), (30, 3), (60, 6)]
    assert len(asked) == 2 and asked[0] < asked[1]   # the second round's context is larger


async def test_a_round_the_turn_cannot_admit_ends_incomplete_with_what_it_has():
    executor = Executor({"a"})
    model = FakeModel(calls_round(("c1", "a", "{}"), usage=(10, 1)), text_round("never"))

    async def refuse(tokens: int) -> bool:
        return False
    events = await run(Loop(model, [executor]), plan("a", admit_round=refuse))
    check_stream(events)
    final = events[-1].data["response"]
    assert events[-1].type == "response.incomplete" and final["incomplete_details"] is None
    assert len(model.requests) == 1 and [item["type"] for item in final["output"]] == ["function_call",
                                                                                       "function_call_output"]
    assert (final["usage"]["input_tokens"], final["usage"]["output_tokens"]) == (10, 1)
