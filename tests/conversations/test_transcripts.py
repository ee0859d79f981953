"""Transcripts' records, queue, flush and deletion (`conversations/transcripts.py`)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from gateway.conversations.transcripts import Transcripts, transcript, user_directory
from gateway.storage.history import Deleted

SEARCH = {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed",
          "results": [{"text": "chunk", "score": 0.5, "attributes": {"filename": "a.txt"}}]}


def turn(status: str = "completed", store: bool = True, conversation: str | None = "c1"):
    answer = {"type": "message", "content": [{"type": "output_text", "text": "the answer"}]}
    plan = SimpleNamespace(store=store, conversation_id=conversation, question="the question", requested_model=None,
                           attachments=(), model=SimpleNamespace(id="m", provider_id="p"),
                           identity=SimpleNamespace(user_id="u"))
    return SimpleNamespace(plan=plan, outcome=SimpleNamespace(recorded=store,
                                                              result={"status": status, "output": [SEARCH, answer]}))


def test_the_record_is_lcores():
    record = transcript(turn())
    assert record["redacted_query"] == "the question" and record["llm_response"] == "the answer"
    assert record["rag_chunks"] == [{"content": "chunk", "source": "a.txt", "score": 0.5,
                                     "attributes": {"filename": "a.txt"}}]
    assert record["tool_calls"][0]["name"] == "file_search" and record["tool_results"][0]["round"] == 1
    assert record["metadata"]["conversation_id"] == "c1" and record["metadata"]["provider"] == "p"
    assert transcript(turn(store=False)) is None and transcript(turn(status="failed")) is None
    assert transcript(turn(conversation=None)) is None


async def test_queued_written_on_close_and_forgotten(tmp_path):
    transcripts = Transcripts(str(tmp_path))
    transcripts.start()
    for _ in range(3):
        transcripts.settled(turn())
    await transcripts.flush()
    directory = user_directory(tmp_path, "u") / "c1"
    assert len(list(directory.glob("*.json"))) == 3
    transcripts.settled(turn())
    await transcripts.forget(Deleted("c1", "u", None, ()))   # what was queued is written, then removed
    assert not directory.exists()
    transcripts.settled(turn())
    await transcripts.close()
    [written] = directory.glob("*.json")
    assert json.loads(written.read_text())["llm_response"] == "the answer"


def test_what_the_request_named():
    from gateway.conversations.transcripts import named_model
    assert named_model(None) == (None, None) and named_model("m") == (None, "m")
    assert named_model("p/org/m") == ("p", "org/m")


async def test_a_failed_write_logs_the_directory_and_reason_without_the_users_hash(tmp_path, caplog):
    storage = tmp_path / "transcripts"
    storage.write_text("a file where the directory should be")
    transcripts = Transcripts(str(storage))
    transcripts.start()
    transcripts.settled(turn())
    with caplog.at_level(logging.ERROR, logger="gateway.conversations"):
        await transcripts.close()
    [line] = [record.getMessage() for record in caplog.records if "transcript" in record.getMessage()]
    assert line == f"writing a transcript under {storage} failed: Not a directory"
    assert user_directory(storage, "u").name not in caplog.text
