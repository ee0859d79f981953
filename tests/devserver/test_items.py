"""The stand-in's items: a turn's input stored in Llama Stack's three shapes (plain,
after a previous response, in a conversation), conversation copies with their ids, and
items replayed to the model as Chat Completions messages the way Llama Stack does."""

from __future__ import annotations

import re

from gateway.devserver.items import (CONVERSATION, PLAIN, PREVIOUS, conversation_copies, conversation_item,
                                     normalize_item, to_messages, turn_input_items)

PARTS = [{"text": "hi", "type": "input_text"}]


def test_a_string_input_in_each_of_llama_stacks_three_shapes():
    [plain] = turn_input_items("hi", PLAIN)
    assert plain["content"] == PARTS and re.fullmatch(r"msg_[0-9a-f-]{36}", plain["id"])
    assert turn_input_items("hi", PREVIOUS) == [{"content": "hi", "role": "user", "type": "message", "id": None,
                                                 "status": None}]
    assert turn_input_items("hi", CONVERSATION)[0]["content"] == PARTS
    assert turn_input_items("hi", CONVERSATION)[0]["id"] is None


def test_items_take_llama_stacks_key_order_and_defaults():
    assert list(normalize_item({"role": "user", "content": "x"})) == ["content", "role", "type", "id", "status"]
    assert normalize_item({"type": "function_call_output", "output": "1", "call_id": "c"}) == {
        "call_id": "c", "output": "1", "type": "function_call_output", "id": None, "status": None}
    assert list(normalize_item({"type": "mcp_approval_response", "approve": True, "approval_request_id": "r"})) == [
        "approval_request_id", "approve", "type", "id", "reason"]
    other = {"type": "reasoning", "summary": []}
    assert normalize_item(other) == other and normalize_item(other) is not other


def test_conversation_copies_get_ids_and_parts():
    message, call = conversation_copies([{"type": "message", "role": "user", "content": "hi", "id": None},
                                         {"type": "function_call_output", "call_id": "c", "output": "1"}])
    assert re.fullmatch(r"msg_[0-9a-f]{48}", message["id"]) and message["content"] == PARTS
    assert call["id"].startswith("item_")
    kept = conversation_copies([{"type": "message", "content": PARTS, "id": "msg_given"}])
    assert kept[0]["id"] == "msg_given"
    assert conversation_item({"role": "user", "content": "as given"})["content"] == "as given"


def test_items_replayed_as_chat_messages():
    messages = to_messages([
        {"type": "message", "role": "developer", "content": "be brief"},
        {"type": "message", "role": "user", "content": PARTS},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"},
                                                             {"type": "output_text", "text": "b"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": {"ok": True}},
        {"type": "mcp_call", "id": "m1", "name": "add", "arguments": "{}", "output": None, "error": "boom"},
        {"type": "mcp_list_tools", "tools": []},
        {"type": "reasoning", "summary": []},
    ])
    assert messages[:3] == [{"role": "system", "content": "be brief"},
                            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                            {"role": "assistant", "content": "ab"}]
    assert messages[3]["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    assert messages[4] == {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'}
    assert messages[6] == {"role": "tool", "tool_call_id": "m1", "content": [{"type": "text", "text": "boom"}]}
    assert len(messages) == 7   # listings and reasoning are not sent to the model
