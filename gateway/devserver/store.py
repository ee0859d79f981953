"""In-memory state: stored responses and conversations.

Everything is lost on restart (the devserver is a test double). Both stores are
bounded so a benchmark that creates responses for hours cannot exhaust memory: the
oldest entries are dropped first.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

MAX_RESPONSES = 100_000
MAX_CONVERSATIONS = 20_000
CONVERSATION_ID_RE = re.compile(r"conv_[0-9a-f]{48}")


@dataclass(slots=True)
class StoredResponse:
    """A response object plus the input items Llama Stack keeps with it.

    `input` is the full replay list (earlier turns' items, then this turn's input), which
    is what `previous_response_id` replays and what `input_items` lists.
    """

    response: dict[str, Any]
    input: list[dict[str, Any]]


class ResponseStore:
    def __init__(self, limit: int = MAX_RESPONSES) -> None:
        # dicts keep insertion order, which is creation order: newest is last.
        self._items: dict[str, StoredResponse] = {}
        self._limit = limit

    def put(self, record: StoredResponse) -> None:
        items = self._items
        items[record.response["id"]] = record
        if len(items) > self._limit:
            del items[next(iter(items))]

    def get(self, response_id: str) -> StoredResponse | None:
        return self._items.get(response_id)

    def delete(self, response_id: str) -> bool:
        return self._items.pop(response_id, None) is not None

    def page(self, *, limit: int, after: str | None, order: str,
             model: str | None = None) -> tuple[list[StoredResponse], bool]:
        records = list(self._items.values())
        if order != "asc":
            records.reverse()
        if model:
            records = [r for r in records if r.response.get("model") == model]
        if after:
            ids = [r.response["id"] for r in records]
            start = ids.index(after) + 1 if after in ids else 0
            records = records[start:]
        return records[:limit], len(records) > limit


def new_item_id(prefix: str = "msg_") -> str:
    """Conversation item ids: prefix + 48 lowercase hex, like Llama Stack."""
    return prefix + secrets.token_hex(24)


def new_conversation_id() -> str:
    return "conv_" + secrets.token_hex(24)


@dataclass(slots=True)
class Conversation:
    id: str
    created_at: int
    metadata: dict[str, Any] | None
    items: list[dict[str, Any]] = field(default_factory=list)
    # With Llama Stack's timing (`ServerState.llama_stack_items`): each item's
    # `created_at` (whole seconds) by id, and what the last turn's model read and wrote.
    created: dict[str, int] = field(default_factory=dict)
    last_turn: list[dict[str, Any]] | None = None

    def append(self, items: list[dict[str, Any]], timed: bool, step: int = 1) -> None:
        """Append items; `timed`: as Llama Stack 0.7.3 times them, in whole seconds from
        now, plus the index where `step` is 1 (its add-items), all alike where it is 0
        (the items a conversation is created with)."""
        now = int(time.time())
        for index, item in enumerate(items):
            self.items.append(item)
            if timed:
                self.created[item["id"]] = now + index * step

    def ordered(self) -> list[dict[str, Any]]:
        """The items as Llama Stack lists them oldest first: a stable sort by their whole
        second, so an add within a second of an earlier add of several items lands among
        them (or insertion order, untimed)."""
        if not self.created:
            return list(self.items)
        return sorted(self.items, key=lambda item: self.created.get(item["id"], 0))

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "object": "conversation", "created_at": self.created_at,
                "metadata": self.metadata, "items": None}


class ConversationStore:
    def __init__(self, limit: int = MAX_CONVERSATIONS) -> None:
        self._items: dict[str, Conversation] = {}
        self._limit = limit

    def create(self, metadata: dict[str, Any] | None) -> Conversation:
        conv = Conversation(new_conversation_id(), int(time.time()), metadata)
        self._items[conv.id] = conv
        if len(self._items) > self._limit:
            del self._items[next(iter(self._items))]
        return conv

    def get(self, conversation_id: str) -> Conversation | None:
        return self._items.get(conversation_id)

    def delete(self, conversation_id: str) -> bool:
        return self._items.pop(conversation_id, None) is not None
