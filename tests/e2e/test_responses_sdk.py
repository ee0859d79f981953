"""The `openai` Python SDK against `gateway serve` in front of the scripted upstream."""

from __future__ import annotations

import pytest

from tests.support.flows import CONV, WEATHER_TOOL, conversation_of
from tests.support.openai_shapes import replay_through_sdk, validate_event, validate_response

def test_create_plain(gateway):
    response = gateway.client().responses.create(input="Hello gateway")
    assert response.status == "completed"
    assert response.output_text == "Scripted reply (turn 1, 1 messages): Hello gateway"
    assert CONV.match(conversation_of(response))
    assert response.model_extra["available_quotas"] == {}
    assert response.completed_at
    assert response.usage.input_tokens_details.cache_write_tokens == 0


def test_raw_body_validates_against_openai_types(gateway):
    reply = gateway.post("/v1/responses", {"input": "Check my shape"})
    assert reply.status == 200
    data = reply.json()
    validate_response(data)
    assert CONV.match(data["conversation"])
    assert data["output_text"].endswith("Check my shape")
    assert data["available_quotas"] == {}


def test_function_tool_round_trip(gateway):
    client = gateway.client()
    first = client.responses.create(input="What is the weather in Paris? Use the tool.", tools=[WEATHER_TOOL])
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    second = client.responses.create(
        previous_response_id=first.id, tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "22 C and sunny"}])
    assert second.output_text == "Tool said: 22 C and sunny"
    assert second.previous_response_id == first.id
    assert conversation_of(second) == conversation_of(first)


def test_conversation_continues(gateway, upstream):
    client = gateway.client()
    first = client.responses.create(input="first turn")
    conversation = conversation_of(first)
    second = client.responses.create(input="second turn", conversation=conversation)
    assert conversation_of(second) == conversation
    assert second.output_text == "Scripted reply (turn 2, 3 messages): second turn"
    # The bare LCORE form and the OpenAI object form name the same conversation.
    third = client.responses.create(input="third turn", conversation={"id": conversation})
    assert third.output_text.startswith("Scripted reply (turn 3, 5 messages)")
    bare = gateway.post("/v1/responses", {"input": "fourth turn", "conversation": conversation[5:]}).ok()
    assert bare["conversation"] == conversation[5:]   # answered in the form it was named in
    assert bare["output_text"].startswith("Scripted reply (turn 4, 7 messages)")
    assert upstream.last()["body"]["conversation"] == conversation


def test_previous_response_id_latest_continues_same_conversation(gateway):
    client = gateway.client()
    first = client.responses.create(input="one")
    second = client.responses.create(input="two", previous_response_id=first.id)
    assert conversation_of(second) == conversation_of(first)
    assert second.previous_response_id == first.id
    assert second.output_text == "Scripted reply (turn 2, 3 messages): two"


def test_previous_response_id_of_older_turn_forks(gateway, upstream):
    client = gateway.client()
    first = client.responses.create(input="root")
    second = client.responses.create(input="branch a", previous_response_id=first.id)
    upstream.clear()
    fork = client.responses.create(input="branch b", previous_response_id=first.id)
    conversation = conversation_of(first)
    assert conversation_of(second) == conversation
    assert conversation_of(fork) != conversation
    assert CONV.match(conversation_of(fork))
    # The fork answered from the history up to `first` only, and upstream was asked
    # with previous_response_id (Llama Stack refuses it together with conversation).
    assert fork.output_text == "Scripted reply (turn 2, 3 messages): branch b"
    sent = upstream.last()["body"]
    assert sent["previous_response_id"] == first.id and "conversation" not in sent
    # The gateway keeps the fork: no upstream conversation was created for it.
    assert upstream.requests("/v1/conversations") == []
    # Continuing the fork by its conversation sees the forked history, not branch a:
    # chained from the fork's latest response.
    after = client.responses.create(input="after fork", conversation=conversation_of(fork))
    assert after.output_text == "Scripted reply (turn 3, 5 messages): after fork"
    sent = upstream.last()["body"]
    assert sent["previous_response_id"] == fork.id and "conversation" not in sent


@pytest.mark.parametrize("helper", [False, True])
def test_stream_events_validate(gateway, helper):
    client = gateway.client()
    if helper:
        with client.responses.stream(model="scripted-chat", input="Stream me please") as stream:
            events = [event for event in stream]
            final = stream.get_final_response()
    else:
        events = list(client.responses.create(input="Stream me please", stream=True))
        final = events[-1].response
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    types = [event.type for event in events]
    assert "response.output_text.done" in types
    extra = final.model_extra or {}
    assert CONV.match(conversation_of(final))
    assert extra["available_quotas"] == {}
    assert extra["output_text"] == "Scripted reply (turn 1, 1 messages): Stream me please"


def test_raw_stream_frames(gateway):
    status, frames = gateway.stream({"input": "Raw frames"})
    assert status == 200
    assert frames[-1] == (None, "[DONE]")
    events = [data for _, data in frames[:-1]]
    for name, data in frames[:-1]:
        assert name == data["type"]
        validate_event(data)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    conversation = events[0]["response"]["conversation"]
    for event in events:
        if "response" in event:
            assert event["response"]["conversation"] == conversation
    in_progress = next(e for e in events if e["type"] == "response.in_progress")
    assert in_progress["response"]["available_quotas"] == {}
    completed = events[-1]
    assert completed["response"]["available_quotas"] == {}
    assert completed["response"]["output_text"].endswith("Raw frames")
    assert replay_through_sdk(events).status == "completed"
