"""Errors through `gateway serve` in front of a real Llama Stack 0.7.3: what the gateway
refuses itself (before any upstream call), ownership of conversations and responses,
and Llama Stack's own failures (the scripted backend failing, a model the backend does
not know), non-streamed and streamed."""

from __future__ import annotations

import openai
import pytest

from tests.support.openai_shapes import validate_response

from .helpers import CONV, checked, kinds, user_texts

pytestmark = pytest.mark.llama_stack

MISSING = "conv_" + "0" * 48


def assert_envelope(reply, status: int, response: str, error_type: str, code: str, param=None, cause=None):
    assert reply.status == status, reply.body
    data = reply.json()
    assert set(data) == {"detail", "error"}, data
    assert data["detail"]["response"] == response
    assert isinstance(data["detail"]["cause"], str) and data["detail"]["cause"]
    if cause is not None:
        assert cause in data["detail"]["cause"], data
    assert data["error"]["type"] == error_type
    assert data["error"]["code"] == code
    assert data["error"]["param"] == param
    assert data["detail"]["cause"] in data["error"]["message"]
    return data


def test_unknown_model_is_404_before_any_upstream_call(gw, chain, stack):
    gw.post("/v1/responses", {"input": "warm the catalog"})
    newest = stack.newest_response_id()
    chain.scripted.clear()
    reply = gw.post("/v1/responses", {"input": "hi", "model": "no-such-model"})
    assert_envelope(reply, 404, "Model not found", "not_found_error", "model_not_found", "model",
                    "Model with ID no-such-model does not exist")
    # Llama Stack ran nothing: no new response there, nothing reached its backend.
    assert stack.newest_response_id() == newest
    assert chain.scripted.requests("/v1/chat/completions") == []
    with pytest.raises(openai.NotFoundError) as caught:
        gw.client().responses.create(input="hi", model="no-such-model", stream=True)
    assert "Model with ID no-such-model does not exist" in caught.value.message
    assert stack.newest_response_id() == newest


def test_unknown_conversation_is_404(gw, stack):
    newest = stack.newest_response_id()
    reply = gw.post("/v1/responses", {"input": "hi", "conversation": MISSING})
    assert_envelope(reply, 404, "Conversation not found", "not_found_error", "conversation_not_found",
                    "conversation", f"Conversation with ID {'0' * 48} does not exist")
    assert stack.newest_response_id() == newest


def test_other_users_conversation_is_403_and_their_responses_404(gw, stack):
    mine = gw.post("/v1/responses?user_id=alice", {"input": "alice's secret"}).json()
    conversation = mine["conversation"]
    reply = gw.post("/v1/responses?user_id=bob", {"input": "let me in", "conversation": conversation})
    assert_envelope(reply, 403, "User does not have permission to perform this action", "permission_error",
                    "conversation_forbidden", "conversation",
                    f"User bob does not have permission to read conversation with ID {conversation}")
    assert user_texts(stack.conversation_items(conversation)) == ["alice's secret"]
    reply = gw.post("/v1/responses?user_id=bob", {"input": "x", "previous_response_id": mine["id"]})
    assert_envelope(reply, 404, "Response not found", "not_found_error", "response_not_found",
                    "previous_response_id")
    for method, path in (("GET", f"/v1/responses/{mine['id']}"),
                         ("GET", f"/v1/responses/{mine['id']}/input_items"),
                         ("DELETE", f"/v1/responses/{mine['id']}")):
        reply = gw.request(method, path + "?user_id=bob")
        assert_envelope(reply, 404, "Response not found", "not_found_error", "response_not_found")
    # Nothing bob did touched alice's response.
    assert stack.get(f"/v1/responses/{mine['id']}")["id"] == mine["id"]
    assert gw.get(f"/v1/responses/{mine['id']}?user_id=alice").status == 200


def test_get_input_items_delete_own_response(gw, stack):
    client = gw.client(default_query={"user_id": "carol"})
    first = client.responses.create(input="keep me")
    second = client.responses.create(input="and me", previous_response_id=first.id)
    fetched = client.responses.retrieve(second.id)
    assert fetched.id == second.id and fetched.output_text == second.output_text
    raw = gw.get(f"/v1/responses/{second.id}?user_id=carol").json()
    validate_response(raw)
    assert raw["conversation"] == {"id": second.conversation.id} and CONV.match(second.conversation.id)
    assert raw["previous_response_id"] == first.id  # echoed though Llama Stack drops it
    assert raw["output"][0]["content"][0]["text"] == "Scripted reply (turn 2, 3 messages): and me"
    items = client.responses.input_items.list(second.id)
    assert "and me" in user_texts([item.model_dump() for item in items.data])
    raw_items = gw.get(f"/v1/responses/{second.id}/input_items?user_id=carol").json()
    assert raw_items["object"] == "list" and raw_items["data"]
    deleted = gw.delete(f"/v1/responses/{second.id}?user_id=carol")
    assert deleted.status == 200
    assert deleted.json() == {"id": second.id, "object": "response", "deleted": True}
    assert gw.get(f"/v1/responses/{second.id}?user_id=carol").status == 404
    assert stack.endpoint.get(f"/v1/responses/{second.id}").status == 404  # deleted on Llama Stack too
    after = client.responses.create(input="after delete", conversation=first.conversation.id)
    assert after.status == "completed"


def test_llama_stack_500_is_a_500_envelope(gw):
    reply = gw.post("/v1/responses", {"input": "please fail-upstream"})
    assert_envelope(reply, 500, "Internal server error", "server_error", "upstream_error",
                    cause="scripted upstream failure")


def test_llama_stack_500_streamed_is_response_failed(gw, stack):
    status, frames = gw.stream({"input": "please fail-upstream"})
    assert status == 200
    events = checked(frames)
    assert kinds(events) == ["created", "in_progress", "failed"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "server_error"
    assert "scripted upstream failure" in failed["error"]["message"]
    assert CONV.match(failed["conversation"]) and failed["conversation"] == events[0]["response"]["conversation"]
    assert failed["available_quotas"] == {}
    # The conversation the client was told about is usable afterwards.
    again = gw.post("/v1/responses", {"input": "retry", "conversation": failed["conversation"]})
    assert again.status == 200, again.body
    # Llama Stack keeps nothing of the failed turn in the conversation.
    assert again.json()["output_text"] == "Scripted reply (turn 1, 1 messages): retry"
    assert user_texts(stack.conversation_items(failed["conversation"])) == ["retry"]


def test_model_the_backend_does_not_know(gw):
    reply = gw.post("/v1/responses", {"input": "hi", "model": "scripted/ghost-model"})
    assert_envelope(reply, 500, "Internal server error", "server_error", "upstream_error",
                    cause="The model `ghost-model` does not exist.")
    status, frames = gw.stream({"input": "hi", "model": "scripted/ghost-model"})
    assert status == 200
    events = checked(frames)
    assert kinds(events) == ["created", "in_progress", "failed"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert "ghost-model" in failed["error"]["message"]
    assert failed["available_quotas"] == {} and CONV.match(failed["conversation"])
