"""POST /v1/responses through `gateway serve` in front of a real Llama Stack 0.7.3:
plain turns, the function tool round trip, conversations (which the gateway creates on
Llama Stack) and previous_response_id (continuing, or forking an older turn)."""

from __future__ import annotations

import pytest

from tests.support.openai_shapes import validate_response

from .conftest import CHAT_MODEL
from .helpers import CONV, WEATHER_TOOL, assistant_texts, conversation_of, user_texts

pytestmark = pytest.mark.llama_stack


def test_create_plain(gw, stack):
    response = gw.client().responses.create(input="Hello gateway")
    assert response.status == "completed"
    assert response.output_text == "Scripted reply (turn 1, 1 messages): Hello gateway"
    # The configured default, not Llama Stack's first LLM, shown as LCORE shows a model
    # it chose: without the provider prefix.
    assert response.model == "scripted-chat"
    assert [item.type for item in response.output] == ["message"]
    conversation = conversation_of(response)
    assert CONV.match(conversation)
    assert response.model_extra["available_quotas"] == {}
    assert response.completed_at
    # The conversation is Llama Stack's own: the gateway created it there.
    assert stack.get(f"/v1/conversations/{conversation}")["id"] == conversation
    stored = stack.get(f"/v1/responses/{response.id}")
    assert stored["status"] == "completed" and stored["model"] == CHAT_MODEL


def test_an_explicit_model_is_echoed_as_sent(gw):
    response = gw.client().responses.create(input="Hello", model=CHAT_MODEL)
    assert response.model == CHAT_MODEL
    status, frames = gw.stream({"input": "Hello", "model": CHAT_MODEL})
    terminal = [data for _, data in frames if isinstance(data, dict) and data["type"] == "response.completed"]
    assert status == 200 and terminal[0]["response"]["model"] == CHAT_MODEL


def test_a_chosen_model_is_short_on_every_event(gw):
    status, frames = gw.stream({"input": "Hello"})
    models = {data["response"]["model"] for _, data in frames if isinstance(data, dict) and "response" in data}
    assert status == 200 and models == {"scripted-chat"}


def test_raw_body_validates_against_openai_types(gw):
    reply = gw.post("/v1/responses", {"input": "Check my shape"})
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"].startswith("application/json")
    data = reply.json()
    validate_response(data)
    assert data["status"] == "completed"
    assert CONV.match(data["conversation"])
    assert data["available_quotas"] == {}
    assert data["output_text"] == "Scripted reply (turn 1, 1 messages): Check my shape"
    assert data["output_text"] == data["output"][0]["content"][0]["text"]


def test_function_tool_round_trip(gw, stack):
    client = gw.client()
    first = client.responses.create(input="What is the weather in Paris? Use the tool.", tools=[WEATHER_TOOL])
    assert first.status == "completed"
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert "location" in calls[0].arguments
    second = client.responses.create(
        previous_response_id=first.id, tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "22 C and sunny"}])
    assert second.output_text == "Tool said: 22 C and sunny"
    assert conversation_of(second) == conversation_of(first)
    # Llama Stack drops previous_response_id from what it returns; the gateway echoes it.
    assert stack.get(f"/v1/responses/{second.id}")["previous_response_id"] is None
    assert second.previous_response_id == first.id
    fetched = gw.get(f"/v1/responses/{second.id}").json()
    validate_response(fetched)
    assert fetched["previous_response_id"] == first.id
    assert fetched["conversation"] == {"id": conversation_of(first)}   # the SDK's form, kept with the turn


def test_conversation_continues_in_every_id_form(gw, stack):
    client = gw.client()
    first = client.responses.create(input="first turn")
    conversation = conversation_of(first)
    second = client.responses.create(input="second turn", conversation=conversation)
    assert conversation_of(second) == conversation
    assert second.output_text == "Scripted reply (turn 2, 3 messages): second turn"
    third = client.responses.create(input="third turn", conversation={"id": conversation})
    assert conversation_of(third) == conversation
    assert third.output_text == "Scripted reply (turn 3, 5 messages): third turn"
    bare = gw.post("/v1/responses", {"input": "fourth turn", "conversation": conversation[5:]})
    assert bare.status == 200, bare.body
    assert bare.json()["conversation"] == conversation[5:]   # the form the client sent (LCORE's clients send bare)
    assert bare.json()["output_text"] == "Scripted reply (turn 4, 7 messages): fourth turn"

    # The turns are in the Llama Stack conversation the gateway created.
    assert stack.get(f"/v1/conversations/{conversation}")["object"] == "conversation"
    items = stack.conversation_items(conversation)
    assert sorted(user_texts(items)) == sorted(["first turn", "second turn", "third turn", "fourth turn"])
    assert sorted(assistant_texts(items)) == sorted([
        "Scripted reply (turn 1, 1 messages): first turn", "Scripted reply (turn 2, 3 messages): second turn",
        "Scripted reply (turn 3, 5 messages): third turn", "Scripted reply (turn 4, 7 messages): fourth turn"])


def test_streamed_turn_continues_a_conversation(gw, stack):
    client = gw.client()
    first = client.responses.create(input="before streaming")
    events = list(client.responses.create(input="streamed follow-up", conversation=conversation_of(first),
                                          stream=True))
    final = events[-1].response
    assert events[-1].type == "response.completed"
    assert conversation_of(final) == conversation_of(first)
    assert final.model_extra["output_text"] == "Scripted reply (turn 2, 3 messages): streamed follow-up"
    assert "streamed follow-up" in user_texts(stack.conversation_items(conversation_of(first)))


def test_previous_response_id_of_latest_turn_continues_same_conversation(gw, stack):
    client = gw.client()
    first = client.responses.create(input="one")
    second = client.responses.create(input="two", previous_response_id=first.id)
    assert conversation_of(second) == conversation_of(first)
    assert second.previous_response_id == first.id
    assert second.output_text == "Scripted reply (turn 2, 3 messages): two"
    third = client.responses.create(input="three", previous_response_id=second.id)
    assert conversation_of(third) == conversation_of(first)
    assert third.output_text == "Scripted reply (turn 3, 5 messages): three"
    assert sorted(user_texts(stack.conversation_items(conversation_of(first)))) == ["one", "three", "two"]


def test_previous_response_id_of_older_turn_forks(gw, stack):
    client = gw.client()
    first = client.responses.create(input="root")
    second = client.responses.create(input="branch a", previous_response_id=first.id)
    conversation = conversation_of(first)
    assert conversation_of(second) == conversation
    fork = client.responses.create(input="branch b", previous_response_id=first.id)
    forked = conversation_of(fork)
    assert CONV.match(forked) and forked != conversation
    assert fork.previous_response_id == first.id
    # Answered from the history up to `first` only.
    assert fork.output_text == "Scripted reply (turn 2, 3 messages): branch b"
    # The fork is kept by the gateway and chained upstream with previous_response_id
    # (Llama Stack replays the full context that way); continuing it by `conversation`
    # sees the forked history, not branch a.
    after = client.responses.create(input="after fork", conversation=forked)
    assert conversation_of(after) == forked
    assert after.output_text == "Scripted reply (turn 3, 5 messages): after fork"
    # The original conversation is untouched by the fork.
    assert sorted(user_texts(stack.conversation_items(conversation))) == ["branch a", "root"]
    again = client.responses.create(input="back on the trunk", conversation=conversation)
    assert again.output_text == "Scripted reply (turn 3, 5 messages): back on the trunk"


def test_fork_of_a_later_turn_keeps_the_whole_history(gw):
    client = gw.client()
    t1 = client.responses.create(input="alpha")
    t2 = client.responses.create(input="beta", conversation=conversation_of(t1))
    client.responses.create(input="gamma", conversation=conversation_of(t1))
    fork = client.responses.create(input="fork", previous_response_id=t2.id)
    assert conversation_of(fork) != conversation_of(t1)
    assert fork.output_text == "Scripted reply (turn 3, 5 messages): fork"
    after = client.responses.create(input="after", conversation=conversation_of(fork))
    assert after.output_text == "Scripted reply (turn 4, 7 messages): after"  # "alpha" is still there


def test_fork_after_a_function_tool_turn_can_be_continued(gw):
    client = gw.client()
    first = client.responses.create(input="Weather in Oslo? Use the tool.", tools=[WEATHER_TOOL])
    call = first.output[0]
    assert call.type == "function_call"
    second = client.responses.create(previous_response_id=first.id, tools=[WEATHER_TOOL], input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "cold"}])
    client.responses.create(input="thanks", previous_response_id=second.id)
    fork = client.responses.create(input="fork after tool", previous_response_id=second.id)
    assert fork.output_text == "Scripted reply (turn 2, 5 messages): fork after tool"
    reply = gw.post("/v1/responses", {"input": "after", "conversation": conversation_of(fork)})
    assert reply.status == 200, reply.body
    assert reply.json()["output_text"] == "Scripted reply (turn 3, 7 messages): after"


def test_an_mcp_error_object_sent_back_as_input_is_accepted(gw):
    # The gateway returns `mcp_call.error` as the `openai` object; clients send outputs
    # back as input, and Llama Stack takes that error only as a string.
    failed_call = {"type": "mcp_call", "id": "mcp_1", "name": "add", "arguments": '{"a": 1, "b": 2}',
                   "server_label": "calc",
                   "error": {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "boom"}]}}
    reply = gw.post("/v1/responses", {"input": [{"role": "user", "content": "Add 1 and 2"}, failed_call,
                                                {"role": "user", "content": "What went wrong?"}]})
    assert reply.status == 200, reply.body
    assert reply.json()["status"] == "completed"
