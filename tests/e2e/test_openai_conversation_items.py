"""Conversation items as the `openai` package's types have them (issue 41), through
`gateway serve`: every item the Conversations API answers (list, get one, add) validates
as `openai.types.conversations.ConversationItem` (a page as `ConversationItemList`), in
forward mode in front of a scripted upstream that keeps items as Llama Stack 0.7.3 does
(`--llama-stack-items`: `status: null`, a turn's string content kept), with the
gateway's conversations, and over the local engine; an assistant message keeps its text
for a typed client."""

from __future__ import annotations

import time
from typing import Any

import pytest
from openai.types.conversations import ConversationItem, ConversationItemList
from openai.types.conversations.message import Message
from openai.types.responses import ResponseOutputText
from pydantic import TypeAdapter

from tests.support.engine_gateway import engine_config
from tests.support.gateway_db import GatewayDb

ITEM: TypeAdapter[Any] = TypeAdapter(ConversationItem)
PAGE = TypeAdapter(ConversationItemList)
LLAMA_STACK_ITEMS = "--llama-stack-items"

SEEDED = [
    {"type": "message", "role": "user", "content": "remember the word pineapple"},
    {"role": "assistant", "content": "noted: pineapple"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "and teal"}]},
]


@pytest.fixture(scope="module", params=["upstream", "gateway", "engine"])
def mode(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def gateway(mode, gateway_factory, upstream_with, chat_upstream):
    if mode == "engine":
        return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url))
    served = upstream_with(LLAMA_STACK_ITEMS)
    return gateway_factory(served.url, llama_stack={"url": served.url, "max_retries": 0, "conversations": mode})


def validated_page(body: Any) -> list[Any]:
    """The page as the SDK's list type, and each of its items as `ConversationItem`."""
    PAGE.validate_python(body)
    return [ITEM.validate_python(item) for item in body["data"]]


def texts(items: list[Any]) -> list[tuple[str, str]]:
    return [(item.role, part.text) for item in items if isinstance(item, Message) for part in item.content]


def test_every_item_validates_as_the_sdks_types(gateway, mode):
    created = gateway.post("/v1/conversations", {"items": SEEDED}).ok()
    cid = created["id"]
    listed = validated_page(gateway.get(f"/v1/conversations/{cid}/items?order=asc").ok())
    assert texts(listed) == [("user", "remember the word pineapple"), ("assistant", "noted: pineapple"),
                             ("assistant", "and teal")]
    # An assistant's text is an `output_text` part with its annotations: a typed client reads it.
    assistant = listed[1]
    assert isinstance(assistant.content[0], ResponseOutputText) and assistant.content[0].annotations == []
    assert all(item.status == "completed" for item in listed)

    added = gateway.post(f"/v1/conversations/{cid}/items", {"items": [
        {"type": "message", "role": "assistant", "content": "added by hand"}]}).ok()
    (one,) = validated_page(added)
    assert isinstance(one.content[0], ResponseOutputText) and one.content[0].text == "added by hand"

    # A turn whose input message has string content: where the upstream keeps the
    # conversation, it keeps that input as sent (`status: null`, the string), and lists it.
    turn = gateway.post("/v1/responses", {"input": [{"type": "message", "role": "user", "content": "which word?"}],
                                          "conversation": cid}).ok()
    assert turn["status"] == "completed"
    listed = validated_page(gateway.get(f"/v1/conversations/{cid}/items?order=asc&limit=100").ok())
    if mode == "upstream":
        assert ("user", "which word?") in texts(listed)
        assert any(role == "assistant" and text.startswith("Scripted reply") for role, text in texts(listed))
    for item in listed:
        got = gateway.get(f"/v1/conversations/{cid}/items/{item.id}").ok()
        assert ITEM.validate_python(got) == item


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def read_by_the_model(upstream, response_id: str) -> list[str]:
    """The texts the scripted model read for a response, in order (its stored input:
    the history it continued, then its input)."""
    items = upstream.get(f"/v1/responses/{response_id}/input_items?order=asc&limit=100").ok()["data"]
    found = []
    for item in items:
        content = item.get("content")
        found.extend([content] if isinstance(content, str) else [part["text"] for part in content or []])
    return found


@pytest.fixture(scope="module")
def upstream_conversations(gateway_factory, upstream_with):
    served = upstream_with(LLAMA_STACK_ITEMS)
    return served, gateway_factory(served.url, llama_stack={"url": served.url, "max_retries": 0,
                                                             "conversations": "upstream"})


def test_items_reach_the_model_in_the_order_they_were_added(upstream_conversations):
    """Created with A, B, then given C: the next turn's model reads A, B, C (Llama Stack
    0.7.3 times B a second after A and C, so it read A, C, B), and an item added after a
    turn reaches the next one (Llama Stack reads the last turn's messages then)."""
    upstream, gateway = upstream_conversations
    cid = gateway.post("/v1/conversations", {"items": [message("A"), message("B")]}).ok()["id"]
    (added,) = gateway.post(f"/v1/conversations/{cid}/items", {"items": [message("C")]}).ok()["data"]
    listed = validated_page(gateway.get(f"/v1/conversations/{cid}/items?order=asc").ok())
    assert [text for _, text in texts(listed)] == ["A", "B", "C"] and listed[2].id == added["id"]
    newest_first = gateway.get(f"/v1/conversations/{cid}/items?limit=2").ok()
    assert [item["id"] for item in newest_first["data"]] == [added["id"], listed[1].id] and newest_first["has_more"]

    failed = gateway.post("/v1/responses", {"input": "fail-upstream", "conversation": cid})
    assert failed.status >= 500   # a turn that failed gives them back, in their order
    assert [text for _, text in texts(validated_page(gateway.get(f"/v1/conversations/{cid}/items?order=asc").ok()))] \
        == ["A", "B", "C"]
    first = gateway.post("/v1/responses", {"input": "Q1", "conversation": cid}).ok()
    assert read_by_the_model(upstream, first["id"]) == ["A", "B", "C", "Q1"]
    held = GatewayDb.of(gateway)
    deadline = time.monotonic() + 10
    while held._query("SELECT id FROM gateway_conversation_items WHERE conversation_id = ?",
                      (cid.removeprefix("conv_"),)):   # the gateway's copies go once the upstream has them
        assert time.monotonic() < deadline, "the items the turn sent are still held"
        time.sleep(0.05)
    # The upstream's conversation holds them now, under the ids the client was given.
    listed = validated_page(gateway.get(f"/v1/conversations/{cid}/items?order=asc&limit=100").ok())
    assert sorted(text for role, text in texts(listed) if role == "user") == ["A", "B", "C", "Q1"]
    assert ITEM.validate_python(gateway.get(f"/v1/conversations/{cid}/items/{added['id']}").ok()).id == added["id"]

    (later,) = gateway.post(f"/v1/conversations/{cid}/items", {"items": [message("D")]}).ok()["data"]
    newest = gateway.get(f"/v1/conversations/{cid}/items?limit=1").ok()
    assert [item["id"] for item in newest["data"]] == [later["id"]] and newest["has_more"] is True
    everything = validated_page(gateway.get(f"/v1/conversations/{cid}/items?order=asc&limit=100").ok())
    assert everything[-1].id == later["id"] and len(everything) == len(listed) + 1   # the upstream's, then held
    assert [item.id for item in validated_page(gateway.get(f"/v1/conversations/{cid}/items?limit=100").ok())] \
        == [item.id for item in everything[::-1]]
    upstream_first = gateway.get(f"/v1/conversations/{cid}/items?order=asc&limit={len(listed)}").ok()
    assert upstream_first["has_more"] is True and later["id"] not in str(upstream_first["data"])
    (dropped,) = gateway.post(f"/v1/conversations/{cid}/items", {"items": [message("E")]}).ok()["data"]
    assert gateway.delete(f"/v1/conversations/{cid}/items/{dropped['id']}").ok()["id"] == cid
    second = gateway.post("/v1/responses", {"input": "Q2", "conversation": cid}).ok()
    read = read_by_the_model(upstream, second["id"])
    assert read[-2:] == ["D", "Q2"] and "E" not in read
    assert read[:4] == ["A", "B", "C", "Q1"]
