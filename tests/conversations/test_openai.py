"""OpenAI's Conversations API bodies (sans-I/O, issue 23), checked against the `openai`
package's own models: the conversation, its deletion, items and their pages."""

from __future__ import annotations

import pytest
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItemList

from gateway.conversations import openai
from gateway.schema.errors import ApiError


def test_conversation_and_deleted_are_the_sdks_models():
    body = openai.conversation("a" * 48, "2026-11-25T20:57:08+00:00", {"k": "v"})
    assert Conversation.model_validate(body).id == "conv_" + "a" * 48 and body["created_at"] == 1795640228
    assert ConversationDeletedResource.model_validate(openai.deleted("a" * 48, True)).deleted is True
    both = openai.union(openai.deleted("a" * 48, False), {"conversation_id": "a" * 48, "deleted": False})
    assert list(both) == ["id", "object", "deleted", "conversation_id"]


def test_new_items_and_what_a_turn_sends():
    user = openai.new_item({"role": "user", "content": "hi"})
    assert user["type"] == "message" and user["status"] == "completed" and user["id"].startswith("msg_")
    assert user["content"] == [{"type": "input_text", "text": "hi"}]
    assistant = openai.new_item({"type": "message", "role": "assistant", "content": "ok"})
    assert assistant["content"] == [{"type": "output_text", "text": "ok"}]
    call = openai.new_item({"type": "function_call_output", "call_id": "c1", "output": "42"})
    assert call["id"].startswith("function_")
    from gateway.turns.body import as_input
    assert as_input(user) == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}


def test_pages():
    items = [{"id": f"m{i}", "type": "message", "role": "user", "status": "completed", "content": []}
             for i in range(5)]
    page = openai.page(items, None, 2, "desc")
    assert [i["id"] for i in page["data"]] == ["m4", "m3"] and page["has_more"] is True
    assert (page["first_id"], page["last_id"]) == ("m4", "m3")
    assert [i["id"] for i in openai.page(items, "m3", 20, "desc")["data"]] == ["m2", "m1", "m0"]
    assert openai.page(items, "m4", 20, "asc") == {"object": "list", "data": [], "first_id": None, "last_id": None,
                                                   "has_more": False}
    assert openai.page(items, "unknown", 20, "asc")["data"] == []
    ConversationItemList.model_validate(openai.page(items, None, 20, "asc"))


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "101"}, {"limit": "x"}, {"order": "up"}])
def test_page_queries_refused(query):
    with pytest.raises(ApiError) as refused:
        openai.page_query(query)
    assert refused.value.status == 422


def test_page_query_defaults():
    assert openai.page_query({}) == (None, 20, "desc")
    assert openai.page_query({"after": "m1", "limit": "100", "order": "asc", "include[]": "x"}) == ("m1", 100, "asc")
