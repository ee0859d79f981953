"""OpenAI's Conversations API bodies (sans-I/O, issue 23), checked against the `openai`
package's own models: the conversation, its deletion, items and their pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItem, ConversationItemList
from pydantic import TypeAdapter

from gateway.conversations import openai
from gateway.schema.errors import ApiError

ITEM: TypeAdapter[Any] = TypeAdapter(ConversationItem)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "llama-stack-0.7.3"


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
    assert assistant["content"] == [{"type": "output_text", "text": "ok", "annotations": []}]
    parts = openai.new_item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})
    assert parts["content"] == assistant["content"]
    call = openai.new_item({"type": "function_call_output", "call_id": "c1", "output": "42"})
    assert call["id"].startswith("function_") and call["status"] == "completed"
    for item in (user, assistant, parts, call):
        ITEM.validate_python(item)
    from gateway.turns.body import as_input
    assert as_input(user) == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}


def test_llama_stacks_items_are_shaped_as_the_sdks():
    """Llama Stack 0.7.3's listing (`status: null` on input items, a seed message's string
    content) validates once shaped; what already had OpenAI's shape is left as it was."""
    listing = json.loads((FIXTURES / "conversations-items-list-asc.json").read_text())
    with pytest.raises(ValueError):
        ConversationItemList.model_validate(listing)
    assistant = json.loads(json.dumps(listing["data"][-1]))
    shaped = openai.shaped_list(listing)
    page = ConversationItemList.model_validate(shaped)
    assert [item.status for item in page.data] == ["completed"] * 5
    assert shaped["data"][0]["content"] == [{"type": "input_text", "text": "Seed message in conversation"}]
    assert shaped["data"][-1] == assistant
    failed = openai.shaped({"type": "mcp_call", "id": "mcp_1", "name": "t", "arguments": "{}", "server_label": "s",
                            "error": "Error (code 1): None", "output": None})
    assert ITEM.validate_python(failed).error.type == "mcp_tool_execution_error"
    text = openai.shaped({"type": "message", "id": "m", "role": "assistant", "status": None, "content": "hi"})
    assert ITEM.validate_python(text).content[0].text == "hi"


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
