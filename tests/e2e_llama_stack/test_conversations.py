"""LCORE's `/v1/conversations` in front of a real Llama Stack (issue 22): the history
from the gateway's turn store, a rename reaching Llama Stack's conversation metadata,
and a delete removing Llama Stack's conversation and stored responses."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.llama_stack


def test_read_rename_and_delete_reach_llama_stack(gw, stack):
    first = gw.post("/v1/responses", {"input": "hello there, say hi"}).ok()
    second = gw.post("/v1/responses", {"input": "and again", "conversation": first["conversation"]}).ok()
    cid = first["conversation"].removeprefix("conv_")

    history = gw.get(f"/v1/conversations/{cid}").ok()["chat_history"]
    assert [turn["messages"][0]["content"] for turn in history] == ["hello there, say hi", "and again"]
    assert [turn["messages"][1]["content"] for turn in history] == [first["output_text"], second["output_text"]]
    assert history[0]["model"] and history[0]["provider"] == "scripted"

    gw.request("PUT", f"/v1/conversations/{cid}", {"topic_summary": "Greetings"}).ok()
    assert stack.get(f"/v1/conversations/{first['conversation']}")["metadata"]["topic_summary"] == "Greetings"

    assert gw.delete(f"/v1/conversations/{cid}").ok()["deleted"] is True
    assert stack.endpoint.get(f"/v1/conversations/{first['conversation']}").status == 404
    for response in (first, second):
        assert stack.endpoint.get(f"/v1/responses/{response['id']}").status == 404
    assert gw.get(f"/v1/conversations/{cid}").status == 404


def test_a_querys_transcript_names_what_it_asked_for(chain, gateway_factory, tmp_path):
    """LCORE's transcript of a `/v1/query` that names its provider and model and sends an
    attachment (the scripted upstream names no provider, so only here can a request name one)."""
    import json
    import time

    from tests.e2e_llama_stack.conftest import DEFAULT_MODEL
    storage = tmp_path / "transcripts"
    gateway = gateway_factory(chain.stack.url, inference=DEFAULT_MODEL, user_data_collection={
        "transcripts_enabled": True, "transcripts_storage": str(storage)})
    log = {"attachment_type": "log", "content_type": "text/plain", "content": "disk full"}
    gateway.post("/v1/query", {"query": "why did it fail?", "provider": "scripted", "model": "scripted-chat",
                               "attachments": [log], "no_tools": True}).ok()
    deadline = time.monotonic() + 10
    while not (found := list(storage.rglob("*.json"))):
        assert time.monotonic() < deadline, "no transcript"
        time.sleep(0.05)
    record = json.loads(found[0].read_text())
    assert record["redacted_query"] == "why did it fail?" and record["attachments"] == [log]
    metadata = record["metadata"]
    assert (metadata["query_provider"], metadata["query_model"]) == ("scripted", "scripted-chat")
    assert (metadata["provider"], metadata["model"]) == ("scripted", "scripted/scripted-chat")


def _user_texts(messages: list) -> list[str]:
    texts = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts.append(content if isinstance(content, str) else " ".join(part.get("text", "") for part in content))
    return texts


def test_items_added_reach_llama_stacks_model_in_order_and_validate(chain, gw):
    """OpenAI's Conversations API over a real Llama Stack (issue 41): a conversation
    created with A, B, then given C, reaches the model as A, B, C (Llama Stack's own
    whole-second order gave A, C, B), an item added after a turn reaches the next one,
    and every item listed validates as the `openai` package's `ConversationItem`."""
    from openai.types.conversations import ConversationItem, ConversationItemList
    from pydantic import TypeAdapter

    def message(text: str) -> dict:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    cid = gw.post("/v1/conversations", {"items": [message("A"), message("B")]}).ok()["id"]
    (added,) = gw.post(f"/v1/conversations/{cid}/items", {"items": [message("C")]}).ok()["data"]
    first = gw.post("/v1/responses", {"input": "Q1", "conversation": cid}).ok()
    assert first["status"] == "completed"
    assert _user_texts(chain.scripted.last("/v1/chat/completions")["body"]["messages"]) == ["A", "B", "C", "Q1"]

    gw.post(f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "D"}]}).ok()
    second = gw.post("/v1/responses", {"input": [{"role": "user", "content": "Q2"}], "conversation": cid}).ok()
    assert second["status"] == "completed"
    assert _user_texts(chain.scripted.last("/v1/chat/completions")["body"]["messages"]) == \
        ["A", "B", "C", "Q1", "D", "Q2"]

    listing = gw.get(f"/v1/conversations/{cid}/items?order=asc&limit=100").ok()
    TypeAdapter(ConversationItemList).validate_python(listing)
    items = [TypeAdapter(ConversationItem).validate_python(item) for item in listing["data"]]
    assert len(items) == 8 and added["id"] in {item.id for item in items}   # Llama Stack keeps the ids it was sent
    for item in items:
        TypeAdapter(ConversationItem).validate_python(gw.get(f"/v1/conversations/{cid}/items/{item.id}").ok())
