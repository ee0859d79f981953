"""Every error status of spec 001's table this version can produce, with its body, and
proof that a refused request changes nothing (no conversation, no upstream call)."""

from __future__ import annotations

import openai
import pytest

from tests.support.processes import free_port

MISSING = "conv_" + "0" * 48


def writes(upstream) -> list[dict]:
    """What the upstream received that creates or changes something (reads are probes)."""
    return [request for request in upstream.requests() if request["method"] != "GET"]


def assert_envelope(reply, status: int, response: str, error_type: str, code: str, param=None, cause=None):
    assert reply.status == status, reply.body
    data = reply.json()
    assert set(data) == {"detail", "error"}
    assert data["detail"]["response"] == response
    assert isinstance(data["detail"]["cause"], str) and data["detail"]["cause"]
    if cause is not None:
        assert cause in data["detail"]["cause"]
    assert data["error"]["type"] == error_type
    assert data["error"]["code"] == code
    assert data["error"]["param"] == param
    assert data["detail"]["cause"] in data["error"]["message"]
    return data


@pytest.mark.parametrize("body, param, code, cause", [
    ({}, "input", "missing_required_parameter", "input: Field required"),
    ({"input": 42}, "input", "invalid_value", "must be a string or a list"),
    ({"input": "hi", "bogus": 1}, "bogus", "unknown_parameter", "bogus: unknown parameter"),
    ({"input": "hi", "conversation": "nope"}, "conversation", "invalid_value", "Improper conversation ID 'nope'"),
    ({"input": "hi", "conversation": "conv_" + "g" * 48}, "conversation", "invalid_value", "Improper"),
    ({"input": "hi", "conversation": MISSING, "previous_response_id": "resp_x"}, "previous_response_id",
     "conflicting_parameters", "mutually exclusive"),
    ({"input": "hi", "tools": [{"type": "bogus"}]}, "tools", "invalid_value", "unknown tool type 'bogus'"),
    ({"input": "hi", "tools": [{"type": "mcp", "server_label": "unknown"}]}, "tools",
     "missing_required_parameter", "server_url"),
    ({"input": [{"type": "message", "role": "robot", "content": "x"}]}, "input", "invalid_value", "role"),
    ({"input": ["a bare string"]}, "input", "invalid_value", "input[0]"),
    ({"input": "hi", "include": ["nope"]}, "include", "invalid_value", "include"),
    ({"input": "hi", "metadata": {"n": 1}}, "metadata", "invalid_value", "metadata"),
    ({"input": "hi", "parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_value", "boolean"),
    ({"input": "hi", "temperature": 3}, "temperature", "invalid_value", "temperature"),
    ({"input": "hi", "previous_response_id": "modr-123"}, "previous_response_id", "invalid_value", "moderation"),
    ({"input": "hi", "stream": "yes"}, "stream", "invalid_value", "boolean"),
])
def test_422_validation_changes_nothing(gateway, upstream, body, param, code, cause):
    upstream.clear()
    reply = gateway.post("/v1/responses", body)
    assert_envelope(reply, 422, "Invalid request", "invalid_request_error", code, param, cause)
    assert writes(upstream) == [], "a refused request must not create or send anything upstream"


@pytest.mark.parametrize("raw, code", [(b'{"input": ', "invalid_json"), (b"", "invalid_body"), (b"[1]", "invalid_body")])
def test_422_unparseable_body(gateway, raw, code):
    assert_envelope(gateway.request("POST", "/v1/responses", raw=raw), 422, "Invalid request",
                    "invalid_request_error", code)


def test_422_empty_user_id(gateway):
    reply = gateway.post("/v1/responses?user_id=", {"input": "hi"})
    assert_envelope(reply, 422, "Invalid request", "invalid_request_error", "invalid_user_id", "user_id",
                    "user_id cannot be empty")


def test_404_unknown_model_before_any_upstream_call(gateway, upstream):
    gateway.post("/v1/responses", {"input": "warm the catalog"})
    upstream.clear()
    reply = gateway.post("/v1/responses", {"input": "hi", "model": "no-such-model"})
    assert_envelope(reply, 404, "Model not found", "not_found_error", "model_not_found", "model",
                    "Model with ID no-such-model does not exist")
    assert upstream.requests("/v1/responses") == [] and upstream.requests("/v1/conversations") == []


def test_404_unknown_conversation(gateway, upstream):
    upstream.clear()
    reply = gateway.post("/v1/responses", {"input": "hi", "conversation": MISSING})
    assert_envelope(reply, 404, "Conversation not found", "not_found_error", "conversation_not_found",
                    "conversation", f"Conversation with ID {'0' * 48} does not exist")
    assert writes(upstream) == []


def test_404_unknown_previous_response(gateway):
    reply = gateway.post("/v1/responses", {"input": "hi", "previous_response_id": "resp_doesnotexist"})
    assert_envelope(reply, 404, "Response not found", "not_found_error", "response_not_found",
                    "previous_response_id", "Response with ID resp_doesnotexist does not exist")


def test_403_other_users_conversation_and_404_for_their_responses(gateway, upstream):
    mine = gateway.post("/v1/responses?user_id=alice", {"input": "alice's secret"}).json()
    upstream.clear()
    reply = gateway.post("/v1/responses?user_id=bob", {"input": "let me in", "conversation": mine["conversation"]})
    assert_envelope(reply, 403, "User does not have permission to perform this action", "permission_error",
                    "conversation_forbidden", "conversation",
                    f"User bob does not have permission to read conversation with ID {mine['conversation'][5:]}")
    assert writes(upstream) == []
    # Another user's response id is indistinguishable from an unknown one.
    for method, path in (("POST", None), ("GET", f"/v1/responses/{mine['id']}"),
                         ("GET", f"/v1/responses/{mine['id']}/input_items"),
                         ("DELETE", f"/v1/responses/{mine['id']}")):
        if method == "POST":
            reply = gateway.post("/v1/responses?user_id=bob", {"input": "x", "previous_response_id": mine["id"]})
        else:
            reply = gateway.request(method, path + "?user_id=bob")
        assert reply.status == 404, (method, path, reply.body)
    assert gateway.get(f"/v1/responses/{mine['id']}?user_id=alice").status == 200


def test_413_body_too_large(gateway_factory, upstream):
    small = gateway_factory(upstream.url, service={"max_request_body_bytes": 2048})
    reply = small.post("/v1/responses", {"input": "x" * 5000})
    assert_envelope(reply, 413, "Request body is too large", "invalid_request_error", "request_too_large",
                    cause="2048 bytes")


def test_413_context_length_from_upstream(gateway):
    reply = gateway.post("/v1/responses", {"input": "please context-overflow now"})
    assert_envelope(reply, 413, "Prompt is too long", "invalid_request_error", "context_length_exceeded",
                    "input", "The input exceeds the context window size of model 'scripted-chat'.")


def test_500_upstream_failure(gateway):
    reply = gateway.post("/v1/responses", {"input": "please fail-upstream"})
    assert_envelope(reply, 500, "Internal server error", "server_error", "upstream_error",
                    cause="scripted upstream failure")


def test_upstream_4xx_keeps_status_with_upstream_message(gateway, upstream):
    first = gateway.post("/v1/responses", {"input": "one"}).json()
    gateway.post("/v1/responses", {"input": "two", "conversation": first["conversation"]})
    # The upstream lost the older response behind the gateway's back: forking from it
    # gets the upstream's 404, passed on with the upstream's message as the cause.
    assert upstream.delete(f"/v1/responses/{first['id']}").status == 200
    reply = gateway.post("/v1/responses", {"input": "fork", "previous_response_id": first["id"]})
    assert_envelope(reply, 404, "Not found", "not_found_error", "upstream_not_found",
                    cause=f"Response '{first['id']}' not found")
    reply = gateway.get(f"/v1/responses/{first['id']}")
    assert_envelope(reply, 404, "Not found", "not_found_error", "upstream_not_found", cause=first["id"])


def test_upstream_5xx_becomes_500(gateway):
    tools = [{"type": "mcp", "server_label": "gone", "server_url": "http://unreachable.invalid/mcp"}]
    reply = gateway.post("/v1/responses", {"input": "Use the add tool", "tools": tools})
    assert_envelope(reply, 500, "Internal server error", "server_error", "upstream_error",
                    cause="Failed to connect to MCP server")


def test_503_upstream_unreachable(gateway_factory):
    dead = gateway_factory(f"http://127.0.0.1:{free_port()}")
    reply = dead.post("/v1/responses", {"input": "hi"})
    assert_envelope(reply, 503, "Unable to connect to Llama Stack", "server_error", "upstream_unavailable",
                    cause="Connection error")
    for path in ("/v1/models", "/v1/info"):
        assert dead.get(path).status == 503
    with pytest.raises(openai.InternalServerError) as caught:
        dead.client().responses.create(input="hi")
    assert caught.value.status_code == 503
    assert "Unable to connect to Llama Stack" in str(caught.value)


def test_503_upstream_idle_timeout(gateway_factory, upstream):
    impatient = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "timeout": 1})
    reply = impatient.post("/v1/responses", {"input": "please hang-upstream"})
    assert_envelope(reply, 503, "Unable to connect to Llama Stack", "server_error", "upstream_unavailable",
                    cause="did not answer in time")


def test_404_and_405_for_unknown_routes(gateway):
    assert_envelope(gateway.get("/v1/nope"), 404, "Not found", "not_found_error", "not_found")
    reply = gateway.request("PUT", "/v1/responses")
    assert_envelope(reply, 405, "Method not allowed", "invalid_request_error", "method_not_allowed")


def test_openai_sdk_exceptions_carry_the_message(gateway):
    client = gateway.client()
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.responses.create(input="hi", extra_body={"bogus": 1})
    assert caught.value.body["code"] == "unknown_parameter"
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(input="hi", model="no-such-model")
    assert "Model with ID no-such-model does not exist" in caught.value.message
