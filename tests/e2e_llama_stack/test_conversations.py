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
