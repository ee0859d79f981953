"""Transcripts through `gateway serve` (issue 22): one per stored turn when enabled, in
LCORE's layout, none when not; written when the process stops cleanly right after a
turn; deleted with their conversation."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from tests.support.engine_gateway import engine_config

KEYS = {"metadata", "redacted_query", "query_is_valid", "llm_response", "rag_chunks", "truncated", "attachments",
        "tool_calls", "tool_results"}


def files(storage: Path) -> list[Path]:
    return sorted(storage.rglob("*.json"))


def wait_for(storage: Path, count: int) -> list[Path]:
    deadline = time.monotonic() + 10
    while len(found := files(storage)) < count:
        assert time.monotonic() < deadline, f"{len(found)} transcripts, not {count}"
        time.sleep(0.05)
    return found


@pytest.mark.parametrize("engine", [False, True], ids=["forward", "engine"])
def test_a_transcript_per_stored_turn(engine, gateway_factory, upstream, chat_upstream, tmp_path):
    storage = tmp_path / "transcripts"
    url = chat_upstream.url if engine else upstream.url
    gateway = gateway_factory(url, **(engine_config(url) if engine else {}), user_data_collection={
        "transcripts_enabled": True, "transcripts_storage": str(storage)})
    first = gateway.post("/v1/responses?user_id=tina", {"input": "first question"}).ok()
    cid = first["conversation"].removeprefix("conv_")
    gateway.stream({"input": "second", "conversation": first["conversation"]}, path="/v1/responses?user_id=tina")
    gateway.post("/v1/query?user_id=tina", {"query": "third", "conversation_id": cid}).ok()
    gateway.post("/v1/responses?user_id=tina", {"input": "not stored", "store": False}).ok()
    found = wait_for(storage, 3)
    directory = storage / hashlib.sha256(b"tina").hexdigest() / cid
    assert {path.parent for path in found} == {directory}
    records = [json.loads(path.read_text()) for path in found]
    assert all(set(record) == KEYS for record in records)
    assert sorted(record["redacted_query"] for record in records) == ["first question", "second", "third"]
    first_record = next(record for record in records if record["redacted_query"] == "first question")
    assert first_record["llm_response"] == first["output_text"]
    assert first_record["metadata"]["user_id"] == "tina" and first_record["metadata"]["conversation_id"] == cid
    time.sleep(0.3)
    assert len(files(storage)) == 3   # the store: false turn has none

    assert gateway.delete(f"/v1/conversations/{cid}?user_id=tina").ok()["deleted"] is True
    assert not directory.exists()


def test_none_when_disabled(gateway_factory, upstream, tmp_path):
    storage = tmp_path / "transcripts"
    gateway = gateway_factory(upstream.url, user_data_collection={"transcripts_storage": str(storage)})
    gateway.post("/v1/responses?user_id=tina", {"input": "hello"}).ok()
    gateway.stop()
    assert files(storage) == []


def test_written_when_the_gateway_stops_cleanly(gateway_factory, upstream, tmp_path):
    storage = tmp_path / "transcripts"
    gateway = gateway_factory(upstream.url, user_data_collection={"transcripts_enabled": True,
                                                                   "transcripts_storage": str(storage)})
    for index in range(5):
        gateway.post("/v1/responses?user_id=tina", {"input": f"question {index}"}).ok()
    gateway.stop()   # SIGTERM right after the answers
    assert len(files(storage)) == 5


def test_what_a_turn_named_and_a_querys_attachments(gateway_factory, upstream, tmp_path):
    storage = tmp_path / "transcripts"
    gateway = gateway_factory(upstream.url, user_data_collection={"transcripts_enabled": True,
                                                                   "transcripts_storage": str(storage)})
    log = {"attachment_type": "log", "content_type": "text/plain", "content": "line 1\nline 2"}
    config = {"attachment_type": "configuration", "content_type": "application/yaml", "content": "a: 1"}
    # The scripted upstream lists its models without a provider: naming one is
    # tests/e2e_llama_stack/test_conversations.py's, against a real Llama Stack.
    gateway.post("/v1/query?user_id=tina", {"query": "what failed?", "attachments": [log, config]}).ok()
    gateway.post("/v1/responses?user_id=tina", {"input": "which model?", "model": "scripted-chat"}).ok()
    gateway.post("/v1/query?user_id=tina", {"query": "and now?"}).ok()
    records = {record["redacted_query"]: record for record in
               (json.loads(path.read_text()) for path in wait_for(storage, 3))}
    assert records["what failed?"]["attachments"] == [log, config]
    named = records["which model?"]["metadata"]
    assert (named["query_provider"], named["query_model"], named["model"]) == (None, "scripted-chat", "scripted-chat")
    unnamed = records["and now?"]
    assert unnamed["attachments"] == [] and unnamed["metadata"]["query_model"] is None
    assert unnamed["metadata"]["query_provider"] is None and unnamed["metadata"]["model"] == "scripted-chat"
