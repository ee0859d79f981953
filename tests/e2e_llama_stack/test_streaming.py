"""Streams through `gateway serve` from a real Llama Stack 0.7.3, whose raw streams have
no `event:` lines, no `[DONE]`, no `response.output_text.done` and gaps in the
numbering: every event the client sees validates against the openai types."""

from __future__ import annotations

import pytest

from tests.support.openai_shapes import replay_through_sdk
from tests.support.raw_client import open_stream, read_until, reset, wait_until

from .conftest import CHAT_MODEL
from .helpers import CONV, WEATHER_TOOL, checked, conversation_of, kinds

pytestmark = pytest.mark.llama_stack


# The SDK's helper re-serialises the final response; spec 001's string `conversation`
# (the openai type is an object) makes pydantic warn about it.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("helper", [False, True], ids=["create-stream", "stream-helper"])
def test_sdk_stream(gw, helper):
    client = gw.client()
    text = "Stream me please"
    if helper:
        with client.responses.stream(model=CHAT_MODEL, input=text) as stream:
            events = list(stream)
            final = stream.get_final_response()
    else:
        events = list(client.responses.create(input=text, stream=True))
        final = events[-1].response
    types = [event.type for event in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "response.output_text.done" in types
    expected = "Scripted reply (turn 1, 1 messages): Stream me please"
    assert next(e for e in events if e.type == "response.output_text.done").text == expected
    assert final.output_text == expected
    assert CONV.match(conversation_of(final))
    extra = final.model_extra or {}
    assert extra["available_quotas"] == {}
    assert extra["output_text"] == expected


def test_raw_stream_frames(gw, stack):
    status, frames = gw.stream({"input": "Raw frames"})
    assert status == 200
    events = checked(frames)
    assert kinds(events)[:3] == ["created", "in_progress", "output_item.added"]
    assert kinds(events)[-4:] == ["output_text.done", "content_part.done", "output_item.done", "completed"]
    conversation = events[0]["response"]["conversation"]
    assert CONV.match(conversation)
    for event in events:
        if "response" in event:
            assert event["response"]["conversation"] == conversation
    in_progress = next(e for e in events if e["type"] == "response.in_progress")
    assert in_progress["response"]["available_quotas"] == {}
    completed = events[-1]["response"]
    assert completed["status"] == "completed"
    assert completed["available_quotas"] == {}
    assert completed["output_text"] == "Scripted reply (turn 1, 1 messages): Raw frames"
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["text"] == completed["output_text"]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == completed["output_text"]
    assert replay_through_sdk(events).output_text == completed["output_text"]
    assert stack.get(f"/v1/conversations/{conversation}")["id"] == conversation


def test_function_call_stream_and_output(gw):
    status, frames = gw.stream({"input": "Weather in Rome? Use the tool.", "tools": [WEATHER_TOOL]})
    assert status == 200
    events = checked(frames)
    assert "function_call_arguments.delta" in kinds(events)
    conversation = events[-1]["response"]["conversation"]
    final = replay_through_sdk(events)
    call = final.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    status, frames = gw.stream({"previous_response_id": final.id, "tools": [WEATHER_TOOL], "input": [
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C, cloudy"}]})
    events = checked(frames)
    completed = events[-1]["response"]
    assert completed["output_text"] == "Tool said: 18 C, cloudy"
    assert completed["previous_response_id"] == final.id
    assert completed["conversation"] == conversation
    assert replay_through_sdk(events).output_text == "Tool said: 18 C, cloudy"


def test_streamed_fork_gets_its_own_conversation(gw):
    client = gw.client()
    first = client.responses.create(input="trunk")
    client.responses.create(input="trunk two", previous_response_id=first.id)
    status, frames = gw.stream({"input": "streamed branch", "previous_response_id": first.id})
    assert status == 200
    events = checked(frames)
    completed = events[-1]["response"]
    # The form of the turn it forks from: the SDK's object.
    forked = completed["conversation"]["id"]
    assert CONV.match(forked) and forked != conversation_of(first)
    assert all(e["response"]["conversation"] == {"id": forked} for e in events if "response" in e)
    assert completed["previous_response_id"] == first.id
    assert completed["output_text"] == "Scripted reply (turn 2, 3 messages): streamed branch"
    after = client.responses.create(input="after streamed fork", conversation=forked)
    assert after.output_text == "Scripted reply (turn 3, 5 messages): after streamed fork"


def test_client_disconnect_cancels_llama_stacks_backend_stream(gw, chain):
    scripted = chain.scripted  # Llama Stack's inference backend
    wait_until(lambda: scripted.open_streams() == 0, "earlier streams to end")
    sock = open_stream(gw.direct_port, {"input": "please stall-stream"})
    assert read_until(sock, b"response.in_progress")[1]
    # Llama Stack opens its inference stream after in_progress; stalled, it ends only
    # when its client (Llama Stack) goes away.
    wait_until(lambda: scripted.open_streams() == 1, "Llama Stack's stream to its backend")
    reset(sock)
    # The gateway's idle timeout (30 s) would end it too: fail well before that.
    wait_until(lambda: scripted.open_streams() == 0, "the backend stream to be cancelled", timeout=10)
