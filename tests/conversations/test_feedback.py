"""Storing feedback as LCORE does: one JSON file per feedback (`{user_id, timestamp,
**request}`), written whole or not at all, then a row; a file that cannot be written
stores nothing; the status switch's answer. The store is a fake (the rows:
tests/storage/test_feedback.py; the endpoints: tests/e2e/test_feedback.py)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from gateway.config.user_data import UserDataCollectionConfig
from gateway.conversations.feedback import FeedbackWriter

FEEDBACK = {"conversation_id": "c" * 48, "user_question": "q", "llm_response": "a", "sentiment": 1}


class Store:
    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.switch: bool | None = None

    async def add(self, feedback_id, user_id, conversation_id, at, feedback) -> None:
        self.rows.append((feedback_id, user_id, conversation_id, at, feedback))

    async def enabled(self, default: bool) -> bool:
        return default if self.switch is None else self.switch

    async def set_enabled(self, enabled: bool, default: bool, by: str, at: str) -> bool:
        previous = await self.enabled(default)
        self.switch = enabled
        return previous


def writer(directory) -> tuple[FeedbackWriter, Store]:
    store = Store()
    config = UserDataCollectionConfig(feedback_enabled=True, feedback_storage=str(directory))
    return FeedbackWriter(config, store), store   # type: ignore[arg-type]


async def test_a_file_then_a_row(tmp_path):
    feedback, store = writer(tmp_path / "feedback" / "nested")
    await feedback.store_feedback("u-1", "c" * 48, FEEDBACK)
    [file] = list((tmp_path / "feedback" / "nested").iterdir())   # the directory is made
    record = json.loads(file.read_text())
    assert record == {"user_id": "u-1", "timestamp": record["timestamp"], **FEEDBACK}
    datetime.fromisoformat(record["timestamp"])
    [(feedback_id, user_id, conversation_id, _, stored)] = store.rows
    assert file.name == f"{feedback_id}.json" and (user_id, conversation_id, stored) == ("u-1", "c" * 48, FEEDBACK)
    assert not list(file.parent.glob("*.tmp"))   # written whole, then renamed


async def test_a_file_that_cannot_be_written_stores_nothing(tmp_path):
    taken = tmp_path / "not-a-directory"
    taken.write_text("a file where the directory should be")
    feedback, store = writer(taken)
    with pytest.raises(OSError):
        await feedback.store_feedback("u-1", "c" * 48, FEEDBACK)
    assert store.rows == [] and sorted(tmp_path.iterdir()) == [taken]
    assert feedback.directory == str(taken)   # what LCORE's 500 names


async def test_the_switch_answers_what_it_was_and_who_changed_it(tmp_path):
    feedback, _ = writer(tmp_path)
    assert await feedback.enabled() is True   # the configuration's, until someone switches it
    answer = await feedback.set_enabled(False, "admin-1")
    assert (answer["previous_status"], answer["updated_status"], answer["updated_by"]) == (True, False, "admin-1")
    datetime.fromisoformat(answer["timestamp"])
    assert await feedback.enabled() is False
