"""`store: false` in front of a real Llama Stack: the turn reads the conversation's
history and Llama Stack keeps nothing of it (no response, no conversation items)."""

from __future__ import annotations

import pytest

from .helpers import conversation_of

pytestmark = pytest.mark.llama_stack


def test_an_aside_in_a_conversation_leaves_it_untouched(gw, stack):
    first = gw.client().responses.create(input="Remember the word teal")
    conversation = conversation_of(first)
    items_before = {item["id"] for item in stack.conversation_items(conversation)}
    reply = gw.post("/v1/responses", {"input": "What was the word?", "store": False, "conversation": conversation})
    assert reply.status == 200, reply.body
    aside = reply.json()
    assert aside["conversation"] == conversation and aside["store"] is False
    # The scripted model counts what reached it: the first turn's history was there.
    assert aside["output_text"].startswith("Scripted reply (turn 2, 3 messages)")
    assert {item["id"] for item in stack.conversation_items(conversation)} == items_before
    assert stack.endpoint.get(f"/v1/responses/{aside['id']}").status == 404
    assert gw.get(f"/v1/responses/{aside['id']}").status == 404


def test_without_a_conversation_none_is_created(gw, stack):
    reply = gw.post("/v1/responses", {"input": "Just this once", "store": False})
    assert reply.status == 200, reply.body
    assert reply.json()["conversation"] is None
    assert stack.endpoint.get(f"/v1/responses/{reply.json()['id']}").status == 404
