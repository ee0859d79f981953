"""LCORE's conversation bodies (`legacy/conversations.py`), from stored rows and turns."""

from __future__ import annotations

from gateway.legacy.conversations import (LCORE_V1, LCORE_V2, TurnView, bare_model, chat_turn, epoch, naive_seconds,
                                          zulu_seconds)

ROW = {"id": "c" * 48, "user_id": "u", "created_at": "2026-11-25T20:57:08.123456+00:00",
       "last_message_at": "2026-11-25T20:57:26+00:00", "message_count": 1, "last_used_model": "m",
       "last_used_provider": "p", "topic_summary": "Hi"}


def test_times_in_lcores_forms():
    assert naive_seconds(ROW["created_at"]) == "2026-11-25T20:57:08"
    assert zulu_seconds(ROW["created_at"]) == "2026-11-25T20:57:08Z"
    assert zulu_seconds("2026-11-25T21:57:08+01:00") == "2026-11-25T20:57:08Z"
    assert epoch("1970-01-01T00:00:10+00:00") == 10.0
    assert naive_seconds("garbage") == "garbage" and epoch("garbage") == 0.0


def test_list_items_per_version():
    assert LCORE_V1.listing([ROW]) == {"conversations": [{
        "conversation_id": "c" * 48, "created_at": "2026-11-25T20:57:08", "last_message_at": "2026-11-25T20:57:26",
        "message_count": 1, "last_used_model": "m", "last_used_provider": "p", "topic_summary": "Hi"}]}
    assert LCORE_V2.listing([ROW])["conversations"][0] == {
        "conversation_id": "c" * 48, "topic_summary": "Hi", "last_message_timestamp": epoch(ROW["last_message_at"])}


def test_a_turn_with_tools_and_documents():
    search = {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed",
              "results": [{"text": "chunk", "score": 0.9, "file_id": "f1",
                           "attributes": {"title": "Doc", "doc_url": "https://docs/x"}}]}
    turn = chat_turn(TurnView("q?", "a.", [search], "p", "m", ROW["created_at"], ROW["last_message_at"]))
    assert turn["messages"][1]["referenced_documents"] == [
        {"doc_url": "https://docs/x", "doc_title": "Doc", "source": None, "document_id": "f1"}]
    assert turn["tool_calls"] == [{"id": "fs_1", "name": "file_search", "args": {"queries": ["q"]},
                                   "type": "file_search_call"}]
    assert turn["tool_results"][0]["round"] == 1 and turn["completed_at"] == "2026-11-25T20:57:26Z"


def test_delete_and_update_bodies():
    assert LCORE_V1.deleted("x", False) == {"conversation_id": "x", "deleted": False,
                                            "response": "Conversation not found", "success": True}
    assert LCORE_V2.updated("x") == {"conversation_id": "x", "success": True,
                                     "message": "Topic summary updated successfully"}


def test_a_model_is_shown_without_its_providers_prefix():
    assert bare_model("scripted/scripted-chat", "scripted") == "scripted-chat"
    assert bare_model("scripted-chat", "scripted") == "scripted-chat"
    assert bare_model("vllm/meta-llama/Llama-3.1-8B", "vllm") == "meta-llama/Llama-3.1-8B"
    assert bare_model("other/model", "scripted") == "other/model"   # not its provider's prefix: as stored
    assert bare_model("scripted-chat", None) == "scripted-chat" and bare_model(None, "scripted") is None
