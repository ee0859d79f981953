"""The WebSocket message protocol and connection-local continuation, sans I/O."""

from __future__ import annotations

import orjson
import pytest

from gateway.http import ws_protocol as proto
from gateway.schema.errors import ApiError


def parse(message, limit: int = 1024):
    return proto.parse(orjson.dumps(message).decode() if not isinstance(message, str) else message, limit)


def test_create_keeps_the_body_and_the_lane():
    parsed = parse({"type": "response.create", "input": "hi", "store": False, "stream_id": "a"})
    assert isinstance(parsed, proto.Create) and parsed.stream_id == "a"
    assert parsed.body == {"input": "hi", "store": False, "stream": True}


@pytest.mark.parametrize("message, code, param", [
    ("{nope", "invalid_json", None),
    ("3", "invalid_message", "type"),
    ({"type": "session.update"}, "unknown_message_type", "type"),
    ({"type": "response.create", "stream": False}, "unsupported_parameter", "stream"),
    ({"type": "response.create", "background": True}, "unsupported_parameter", "background"),
    ({"type": "response.create", "stream_options": {}}, "unsupported_parameter", "stream_options"),
    ({"type": "response.create", "stream_id": 7}, "invalid_value", "stream_id"),
    ({"type": "response.create", "stream_id": "x" * 129}, "invalid_value", "stream_id"),
    ({"type": "response.create", "input": "é" * 600}, "message_too_large", None),  # 1,200 UTF-8 bytes
])
def test_refusals(message, code, param):
    with pytest.raises(ApiError) as refused:
        parse(message)
    assert refused.value.code == code and refused.value.param == param and 400 <= refused.value.status < 500


def test_error_envelope_maps_detail_inside_error():
    error = ApiError(404, "Model not found", "Model with ID x does not exist", code="model_not_found", param="model")
    envelope = orjson.loads(proto.error_message(error, "lane"))
    assert envelope == {"type": "error", "status": 404, "stream_id": "lane", "error": {
        "type": "not_found_error", "code": "model_not_found", "param": "model",
        "message": "Model not found: Model with ID x does not exist",
        "detail": {"response": "Model not found", "cause": "Model with ID x does not exist"}}}


def test_steer_is_refused_with_its_input_handed_back():
    refused = orjson.loads(proto.steer_refused(parse({"type": "response.steer", "input": "go",
                                                      "previous_response_id": "resp_1"})))
    assert refused["error"]["code"] == "steering_not_supported"
    assert refused["steer"] == {"input": "go", "previous_response_id": "resp_1"}


def response(response_id: str, text: str) -> dict:
    return {"id": response_id, "status": "completed",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}


def create(**body) -> proto.Create:
    return proto.Create({"stream": True, **body}, None, 0)


def test_store_false_continuation_sends_the_context_instead_of_the_id():
    memory = proto.Continuation(10_000)
    first = create(input="one", store=False)
    memory.record(first.body, response("resp_1", "r1"))
    body, held = memory.body(create(input="two", store=False, previous_response_id="resp_1"))
    assert held == "resp_1" and "previous_response_id" not in body
    assert [item.get("role") for item in body["input"]] == ["user", "assistant", "user"]
    memory.record(body, response("resp_2", "r2"))
    body, _ = memory.body(create(input=[{"type": "message", "role": "user", "content": "three"}], store=False,
                                 previous_response_id="resp_2"))
    assert len(body["input"]) == 5   # the whole chain, then the new item


def test_a_tool_output_must_answer_a_call_in_the_held_context():
    memory = proto.Continuation(10_000)
    called = {"id": "resp_1", "status": "completed", "output": [
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}]}
    memory.record(create(input="one", store=False).body, called)
    answer = [{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]
    body, held = memory.body(create(input=answer, store=False, previous_response_id="resp_1"))
    assert held == "resp_1" and body["input"][-1] == answer[0]
    for stray in ({"type": "function_call_output", "call_id": "call_2", "output": "?"},
                  {"type": "custom_tool_call_output", "call_id": "call_1", "output": "?"}):
        with pytest.raises(ApiError) as refused:
            memory.body(create(input=[stray], store=False, previous_response_id="resp_1"))
        assert refused.value.status == 400 and refused.value.param == "input"
        assert refused.value.cause.endswith(f"with call_id {stray['call_id']}.")


def test_stored_and_unknown_ids_go_through_as_on_http():
    memory = proto.Continuation(10_000)
    memory.record(create(input="one").body, response("resp_1", "r1"))   # store defaults to true
    request = create(input="two", previous_response_id="resp_1")
    assert memory.body(request) == (request.body, None)
    other = create(input="x", store=False, previous_response_id="resp_other")
    assert memory.body(other) == (other.body, None)   # the store is asked (and says not found)


def test_context_over_the_cap_is_not_held():
    memory = proto.Continuation(1024)
    memory.record(create(input="y" * 2000, store=False).body, response("resp_big", "r"))
    with pytest.raises(ApiError) as refused:
        memory.body(create(input="more", store=False, previous_response_id="resp_big"))
    assert refused.value.code == "previous_response_not_found" and "1024 bytes" in refused.value.cause


def test_eviction_forgets_the_latest_only():
    memory = proto.Continuation(10_000)
    memory.record(create(input="one", store=False).body, response("resp_1", "r1"))
    memory.evict("resp_other")
    assert memory.body(create(input="two", store=False, previous_response_id="resp_1"))[1] == "resp_1"
    memory.evict("resp_1")
    request = create(input="two", store=False, previous_response_id="resp_1")
    assert memory.body(request) == (request.body, None)


def test_a_held_turn_chained_to_a_stored_response_stays_chained():
    memory = proto.Continuation(10_000)
    memory.record(create(input="one", store=False, previous_response_id="resp_stored").body, response("resp_1", "r"))
    body, held = memory.body(create(input="two", store=False, previous_response_id="resp_1"))
    assert held == "resp_1" and body["previous_response_id"] == "resp_stored" and len(body["input"]) == 3
    memory.record(body, response("resp_2", "r2"))
    body, _ = memory.body(create(input="three", store=False, previous_response_id="resp_2"))
    assert body["previous_response_id"] == "resp_stored" and len(body["input"]) == 5


def test_a_message_size_is_its_utf8_bytes():
    assert parse({"type": "response.create", "input": "hi"}).size == len('{"type":"response.create","input":"hi"}')
    text = orjson.dumps({"type": "response.create", "input": "é" * 100}).decode()
    assert parse(text).size == len(text.encode()) == len(text) + 100
    assert proto.parse(text.encode(), 1024).size == len(text.encode())


def test_the_queue_refusals_name_their_bound():
    for error in (proto.queue_full(8), proto.queue_bytes_full(65536)):
        assert error.status == 429 and error.code == "websocket_queue_full"
    assert "65536 bytes" in proto.queue_bytes_full(65536).cause


@pytest.mark.parametrize("as_text", [True, False])
def test_a_message_of_too_many_items_is_refused_before_it_is_decoded(as_text, monkeypatch):
    message = '{"type": "response.create", "stream_id": "a", "input": [' + ",".join(["{}"] * 2000) + "]}"
    decoded: list[object] = []
    real_loads = orjson.loads
    monkeypatch.setattr(proto.orjson, "loads", lambda data: decoded.append(data) or real_loads(data))
    data = message if as_text else message.encode()
    with pytest.raises(ApiError) as refused:
        proto.parse(data, 10_000_000, max_items=1000)
    assert (refused.value.status, refused.value.code) == (400, "invalid_json")
    assert "1000" in refused.value.cause
    assert proto.lane_of(data, max_items=1000) is None
    assert decoded == []   # neither the parse nor the lane decoded it
    assert isinstance(proto.parse(data, 10_000_000, max_items=10_000), proto.Create)
