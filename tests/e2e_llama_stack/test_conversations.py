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
