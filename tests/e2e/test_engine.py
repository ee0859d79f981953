"""The local engine through `gateway serve` (llama_stack.api: chat_completions) in front
of the scripted Chat Completions upstream (`--no-responses`), with the `openai` SDK."""

from __future__ import annotations

import re

import pytest

from tests.support.flows import CONV, WEATHER_TOOL, checked, conversation_of, kinds
from tests.support.openai_shapes import replay_through_sdk, validate_event, validate_response
from tests.support.raw_client import open_stream, read_until, reset, wait_until

CHAT = "/v1/chat/completions"
RESPONSE_ID = re.compile(rb'"id":"(resp_[0-9a-f]{48})"')
OPTIONS = {"stream": True, "stream_options": {"include_usage": True}}
# LCORE's default system prompt, sent when the request has no instructions (turns/prompts.py).
SYSTEM = {"role": "system", "content": "You are a helpful assistant"}


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                           "api": "chat_completions"})


def last_chat(upstream):
    return upstream.last(CHAT)["body"]


def test_text_with_the_sdk(engine, chat_upstream):
    response = engine.client().responses.create(input="Hello engine", temperature=0.5)
    assert response.status == "completed"
    assert response.output_text == "Scripted reply (turn 1, 1 messages): Hello engine"
    assert re.fullmatch(r"resp_[0-9a-f]{48}", response.id) and re.fullmatch(r"msg_[0-9a-f]{48}", response.output[0].id)
    assert CONV.match(conversation_of(response)) and response.model == "scripted-chat"
    assert response.usage.input_tokens == 2 + 5 and response.usage.output_tokens == 8   # + the system prompt
    assert last_chat(chat_upstream) == {"model": "scripted-chat", **OPTIONS, "temperature": 0.5,
                                        "messages": [SYSTEM, {"role": "user", "content": "Hello engine"}]}


def test_raw_json_body_validates(engine):
    body = engine.post("/v1/responses", {"input": "Check my shape", "instructions": "Be terse."}).ok()
    validate_response(body)
    assert body["output_text"] == "Scripted reply (turn 1, 1 messages): Check my shape"
    assert body["available_quotas"] == {} and body["instructions"] == "Be terse."


def test_stream_events_validate_and_the_sdk_consumes_them(engine):
    status, frames = engine.stream({"input": "Stream to me"})
    assert status == 200
    events = checked(frames)  # event lines, contiguous numbers, every event an openai type
    assert kinds(events) == ["created", "in_progress", "output_item.added", "content_part.added"] \
        + ["output_text.delta"] * 9 + ["output_text.done", "content_part.done", "output_item.done", "completed"]
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["text"] == "Scripted reply (turn 1, 1 messages): Stream to me"
    assert replay_through_sdk(events).output_text == done["text"]
    final = events[-1]["response"]
    assert final["usage"]["total_tokens"] > 0 and final["available_quotas"] == {}
    assert final["output_text"] == done["text"] and CONV.match(final["conversation"])
    with engine.client().responses.stream(model="scripted-chat", input="SDK stream helper") as stream:
        for _ in stream:
            pass
        assert stream.get_final_response().output_text == "Scripted reply (turn 1, 1 messages): SDK stream helper"


def test_function_round_trip_by_previous_response_id(engine, chat_upstream):
    client = engine.client()
    first = client.responses.create(input="What is the weather in Paris? Use the tool.", tools=[WEATHER_TOOL])
    assert first.status == "completed"
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].arguments == '{"location": "Paris"}'
    assert re.fullmatch(r"fc_[0-9a-f]{48}", calls[0].id)
    sent = last_chat(chat_upstream)
    assert sent["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city", "parameters": WEATHER_TOOL["parameters"]}}]
    second = client.responses.create(
        previous_response_id=first.id, tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "22 C and sunny"}])
    assert second.output_text == "Tool said: 22 C and sunny"
    assert second.previous_response_id == first.id and conversation_of(second) == conversation_of(first)
    assert last_chat(chat_upstream)["messages"] == [
        SYSTEM, {"role": "user", "content": "What is the weather in Paris? Use the tool."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": calls[0].call_id, "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": calls[0].call_id, "content": "22 C and sunny"}]


def test_function_call_stream_and_parallel_calls(engine):
    time_tool = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
    status, frames = engine.stream({"input": "parallel-calls: use the tools", "tools": [WEATHER_TOOL, time_tool]})
    events = checked(frames)
    assert kinds(events).count("function_call_arguments.done") == 2
    final = replay_through_sdk(events)
    assert [item.name for item in final.output] == ["get_weather", "get_time"]
    assert len({item.call_id for item in final.output}) == 2


def test_multi_turn_by_conversation(engine, chat_upstream):
    client = engine.client()
    first = client.responses.create(input="first turn")
    conversation = conversation_of(first)
    second = client.responses.create(input="second turn", conversation=conversation)
    assert conversation_of(second) == conversation
    assert second.output_text == "Scripted reply (turn 2, 3 messages): second turn"
    third = engine.post("/v1/responses", {"input": "third turn", "conversation": conversation[5:],
                                          "stream": False}).ok()
    assert third["output_text"] == "Scripted reply (turn 3, 5 messages): third turn"
    roles = [m["role"] for m in last_chat(chat_upstream)["messages"]]
    assert roles == ["system"] + ["user", "assistant"] * 2 + ["user"]


def test_image_input(engine, chat_upstream):
    image = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    response = engine.client().responses.create(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "What is in this image?"},
        {"type": "input_image", "image_url": image, "detail": "low"}]}])
    assert response.output_text == "Scripted reply (turn 1, 1 messages): What is in this image?"
    assert last_chat(chat_upstream)["messages"] == [SYSTEM, {"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": image, "detail": "low"}}]}]


def test_structured_output(engine, chat_upstream):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    response = engine.client().responses.create(
        input="Name a city", text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}})
    assert response.text.format.type == "json_schema"
    assert last_chat(chat_upstream)["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}}


def test_reasoning(engine):
    status, frames = engine.stream({"input": "think-aloud about it", "reasoning": {"effort": "low"}})
    events = checked(frames)
    assert kinds(events)[2:5] == ["output_item.added", "content_part.added", "reasoning_text.delta"]
    final = replay_through_sdk(events)
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output[0].content[0].text == "Thinking about: think-aloud about it"
    assert final.usage.output_tokens_details.reasoning_tokens == 5


def test_length_is_incomplete(engine):
    body = engine.post("/v1/responses", {"input": "finish-length please"}).ok()
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}
    status, frames = engine.stream({"input": "content-filter please"})
    events = checked(frames)
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "content_filter"}


def test_upstream_refusal_before_the_first_byte_keeps_its_status(engine):
    assert engine.post("/v1/responses", {"input": "context-overflow now", "stream": True}).status == 413
    assert engine.post("/v1/responses", {"input": "fail-upstream now"}).status == 500
    status, frames = engine.stream({"input": "error-event now"})
    events = checked(frames)
    assert events[-1]["type"] == "response.failed" and events[-1]["response"]["error"]["message"]


def test_unsupported_request_is_a_clear_422_that_creates_nothing(engine):
    reply = engine.post("/v1/responses?user_id=refused", {"input": "hi", "prompt": {"id": "pmpt_1"}})
    assert reply.status == 422
    assert reply.json()["error"]["param"] == "prompt" and "prompt" in reply.json()["detail"]["cause"]
    assert engine.get("/v1/responses?user_id=refused").ok()["data"] == []


def test_get_during_a_stream_shows_progress(engine):
    sock = open_stream(engine.direct_port, {"input": "slow stream please", "store": True,
                                            "metadata": {"scripted_delay_ms": "300"}})
    try:
        head, seen = read_until(sock, b"response.output_text.delta")
        assert seen
        response_id = RESPONSE_ID.search(head).group(1).decode()
        during = engine.get(f"/v1/responses/{response_id}").ok()
        assert during["status"] == "in_progress" and during["id"] == response_id
        assert len(during["output"]) <= 1
    finally:
        reset(sock)


def test_client_disconnect_cancels_the_upstream(engine, chat_upstream):
    sock = open_stream(engine.direct_port, {"input": "please stall-stream"})
    head, seen = read_until(sock, b"response.in_progress")
    assert seen
    reset(sock)
    wait_until(lambda: chat_upstream.open_streams() == 0, "the upstream stream to be cancelled")


def test_get_delete_input_items_and_list_with_pagination(engine):
    user = "?user_id=lister"
    ids = [engine.post(f"/v1/responses{user}", {"input": f"number {n}"}).ok()["id"] for n in range(3)]
    got = engine.get(f"/v1/responses/{ids[0]}{user}").ok()
    validate_response({k: v for k, v in got.items() if k != "available_quotas"})
    assert got["status"] == "completed" and got["output_text"].endswith("number 0")
    items = engine.get(f"/v1/responses/{ids[0]}/input_items{user}").ok()
    assert [item["content"] for item in items["data"]] == ["number 0"] and items["has_more"] is False
    page = engine.get(f"/v1/responses{user}&order=asc&limit=2").ok()
    assert [r["id"] for r in page["data"]] == ids[:2] and page["has_more"] is True
    rest = engine.get(f"/v1/responses{user}&order=asc&limit=2&after={page['last_id']}").ok()
    assert [r["id"] for r in rest["data"]] == ids[2:] and rest["has_more"] is False
    newest = engine.get(f"/v1/responses{user}&limit=1").ok()
    assert [r["id"] for r in newest["data"]] == ids[2:]
    assert engine.get(f"/v1/responses{user}&limit=0").status == 422
    deleted = engine.delete(f"/v1/responses/{ids[1]}{user}").ok()
    assert deleted == {"id": ids[1], "object": "response", "deleted": True}
    assert engine.get(f"/v1/responses/{ids[1]}{user}").status == 404
    assert [r["id"] for r in engine.get(f"/v1/responses{user}&order=asc").ok()["data"]] == [ids[0], ids[2]]


def test_another_users_responses_are_404_and_conversations_403(engine):
    mine = engine.post("/v1/responses?user_id=alice", {"input": "private"}).ok()
    for path in (f"/v1/responses/{mine['id']}", f"/v1/responses/{mine['id']}/input_items"):
        assert engine.get(f"{path}?user_id=mallory").status == 404
    assert engine.delete(f"/v1/responses/{mine['id']}?user_id=mallory").status == 404
    assert engine.get("/v1/responses?user_id=mallory").ok()["data"] == []
    reply = engine.post("/v1/responses?user_id=mallory", {"input": "x", "previous_response_id": mine["id"]})
    assert reply.status == 404
    reply = engine.post("/v1/responses?user_id=mallory", {"input": "x", "conversation": mine["conversation"]})
    assert reply.status == 403
    assert engine.get(f"/v1/responses/{mine['id']}?user_id=alice").status == 200


def test_store_false_is_not_kept(engine):
    body = engine.post("/v1/responses?user_id=nostore", {"input": "forget me", "store": False}).ok()
    assert body["store"] is False and body["conversation"] is None
    assert engine.get(f"/v1/responses/{body['id']}?user_id=nostore").status == 404
    assert engine.get("/v1/responses?user_id=nostore").ok()["data"] == []


def test_requires_action_switch(gateway_factory, chat_upstream):
    gateway = gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                              "api": "chat_completions"},
                              inference={"client_tool_status": "requires_action"})
    status, frames = gateway.stream({"input": "Weather in Rome? Use the tool.", "tools": [WEATHER_TOOL]})
    events = [data for _, data in frames if data != "[DONE]"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # `requires_action` is spec 002's, not in the openai types: only it is exempt.
    for event in events[:-1]:
        validate_event(event)
    assert events[-1]["type"] == "response.requires_action"
    first = events[-1]["response"]
    assert first["status"] == "requires_action" and first["output"][0]["type"] == "function_call"
    second = gateway.post("/v1/responses", {"previous_response_id": first["id"], "tools": [WEATHER_TOOL], "input": [
        {"type": "function_call_output", "call_id": first["output"][0]["call_id"], "output": "cold"}]}).ok()
    assert second["output_text"] == "Tool said: cold"


def test_auto_picks_the_engine_when_the_upstream_has_no_responses_api(gateway_factory, chat_upstream):
    gateway = gateway_factory(chat_upstream.url)
    assert gateway.post("/v1/responses", {"input": "auto"}).ok()["output_text"].endswith("auto")
    assert "run on the local engine" in gateway.log()
    # An OpenAI-compatible /v1/models has no Llama Stack custom_metadata: every model is an LLM.
    assert "custom_metadata" not in chat_upstream.get("/v1/models").json()["data"][0]
    models = gateway.get("/v1/models?model_type=llm").ok()
    assert [model["id"] for model in models["data"]] == ["scripted-chat", "scripted-mini"]
    assert gateway.post("/v1/responses", {"input": "pick", "model": "scripted-mini"}).ok()["model"] == "scripted-mini"


USER = {"role": "user", "content": "Hi there"}
SHAPES = [
    pytest.param({"input": [{"role": "developer", "content": "Answer in French."}, USER]},
                 {"messages": [{"role": "system", "content": "Answer in French."}, USER]}, id="developer-role"),
    pytest.param({"input": [{"type": "message", "role": "user",
                             "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}],
                  "instructions": "Be terse."},
                 {"messages": [{"role": "system", "content": "Be terse."},
                               {"role": "user", "content": [{"type": "text", "text": "a"},
                                                            {"type": "text", "text": "b"}]}]}, id="parts+instructions"),
    pytest.param({"input": "Hi there", "temperature": 0.3, "top_p": 0.5, "max_output_tokens": 99,
                  "metadata": {"k": "v"}, "safety_identifier": "user-7", "top_logprobs": 2},
                 {"messages": [USER], "temperature": 0.3, "top_p": 0.5, "max_tokens": 99, "metadata": {"k": "v"},
                  "user": "user-7", "top_logprobs": 2, "logprobs": True}, id="options"),
    pytest.param({"input": "Hi there", "tools": [WEATHER_TOOL], "tool_choice": {"type": "function",
                                                                                "name": "get_weather"},
                  "parallel_tool_calls": False},
                 {"messages": [USER], "tools": [{"type": "function", "function": {
                     "name": "get_weather", "description": "Get the weather for a city",
                     "parameters": WEATHER_TOOL["parameters"]}}],
                  "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                  "parallel_tool_calls": False}, id="forced-tool"),
    pytest.param({"input": "Hi there", "tools": [WEATHER_TOOL], "tool_choice": "none"},
                 # As spec 001 and forward mode have it: `none` sends no tools at all.
                 {"messages": [USER]}, id="tool-choice-none"),
    pytest.param({"input": "Hi there", "text": {"format": {"type": "json_object"}}},
                 {"messages": [USER], "response_format": {"type": "json_object"}}, id="json-object"),
    pytest.param({"input": [{"role": "user", "content": [{"type": "input_file", "filename": "a.txt",
                                                          "file_data": "data:text/plain;base64,aGk="}]}]},
                 {"messages": [{"role": "user", "content": [{"type": "file", "file": {
                     "file_data": "data:text/plain;base64,aGk=", "filename": "a.txt"}}]}]}, id="input-file"),
    pytest.param({"input": [USER, {"type": "function_call", "call_id": "c1", "name": "get_weather",
                                   "arguments": "{}"},
                            {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{}"},
                            {"type": "function_call_output", "call_id": "c1", "output": "sun"},
                            {"type": "function_call_output", "call_id": "c2", "output": "rain"}],
                  "tools": [WEATHER_TOOL]},
                 {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
                     {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "sun"},
                     {"role": "tool", "tool_call_id": "c2", "content": "rain"}],
                  "tools": [{"type": "function", "function": {
                      "name": "get_weather", "description": "Get the weather for a city",
                      "parameters": WEATHER_TOOL["parameters"]}}]}, id="merged-calls"),
]


@pytest.mark.parametrize("request_body, expected", SHAPES)
def test_the_upstream_receives_exactly(engine, chat_upstream, request_body, expected):
    engine.post("/v1/responses", request_body).ok()
    if "instructions" not in request_body:
        expected = {**expected, "messages": [SYSTEM, *expected["messages"]]}
    assert last_chat(chat_upstream) == {"model": "scripted-chat", **OPTIONS, **expected}


def test_listing_responses_in_forward_mode_is_a_clear_501(gateway):
    reply = gateway.get("/v1/responses")
    assert reply.status == 501
    assert reply.json()["error"]["code"] == "not_implemented" and "engine mode" in reply.json()["detail"]["cause"]


def test_item_reference_names_an_earlier_item(engine, chat_upstream, gateway):
    """`item_reference` input items (OpenAI's; Llama Stack's types have none): the engine
    sends the referenced item; an unknown id is a clear 422 that creates nothing; in
    forward mode LCORE's model refuses them with LCORE's 422, as before."""
    client = engine.client()
    first = client.responses.create(input="remember this")
    answer = first.output[0].id
    body = {"previous_response_id": first.id,
            "input": [{"type": "item_reference", "id": answer}, {"role": "user", "content": "and now?"}]}
    engine.post("/v1/responses", body).ok()
    messages = last_chat(chat_upstream)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "assistant", "user"]
    assert messages[3]["content"] == messages[2]["content"] == first.output_text
    unknown = engine.post("/v1/responses", {**body, "input": [{"type": "item_reference", "id": "msg_nope"}]})
    assert unknown.status == 422 and "msg_nope" in unknown.json()["detail"]["cause"]
    forwarded = gateway.post("/v1/responses", {"input": [{"type": "item_reference", "id": answer}]})
    assert forwarded.status == 422 and isinstance(forwarded.json()["detail"], list)
