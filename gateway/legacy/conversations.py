"""LCORE's conversation bodies (sans-I/O): what `/v1/conversations` and
`/v2/conversations` answer, assembled from the gateway's records and its turn store.

One audience per API version (`LCORE_V1`, `LCORE_V2`): the handlers in
`gateway/http/conversations.py` do the work once and ask the audience for the body, so
OpenAI's Conversations API on the same paths is one more audience, not a second set
of handlers. Times are LCORE's: the list's `created_at`/`last_message_at` without a
timezone and to the second (`2026-11-25T20:57:08`), a turn's `started_at` with `Z`,
v2's `last_message_timestamp` as epoch seconds (lcore.md 4 and 13).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping, TypedDict

from gateway.legacy.items import ToolCallSummary, ToolResultSummary, referenced_documents, summaries

DELETED = "Conversation deleted successfully"
NOT_DELETED = "Conversation not found"
UPDATED = "Topic summary updated successfully"


@dataclass(frozen=True, slots=True)
class TurnView:
    """One stored turn, as the bodies need it."""

    question: str
    answer: str
    items: list[dict[str, Any]]   # its tool items, in output order
    provider: str | None
    model: str | None
    started_at: str               # ISO-8601 as stored
    completed_at: str


def _parsed(stored: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(stored)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def naive_seconds(stored: str) -> str:
    """`2026-11-25T20:57:08` (UTC, no timezone), as LCORE's list shows times."""
    moment = _parsed(stored)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") if moment else stored


def zulu_seconds(stored: str) -> str:
    """`2026-11-25T20:57:25Z`, as LCORE's `chat_history` shows times."""
    moment = _parsed(stored)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else stored


def epoch(stored: str) -> float:
    moment = _parsed(stored)
    return moment.timestamp() if moment else 0.0


def bare_model(model: str | None, provider: str | None) -> str | None:
    """A stored model id as LCORE shows it beside its provider: without the
    `<provider>/` prefix Llama Stack's ids carry (`scripted/scripted-chat` of provider
    `scripted` is `scripted-chat`; LCORE splits the id it chose at its first `/`)."""
    if model and provider and model.startswith(f"{provider}/"):
        return model[len(provider) + 1:]
    return model


class ChatTurn(TypedDict):
    """LCORE's `ConversationTurn`."""
    messages: list[dict[str, Any]]
    tool_calls: list[ToolCallSummary]
    tool_results: list[ToolResultSummary]
    provider: str | None
    model: str | None
    started_at: str
    completed_at: str


class ConversationDetails(TypedDict):
    """LCORE's `ConversationResponse` (`GET /v1|v2/conversations/{id}`)."""
    conversation_id: str
    chat_history: list[ChatTurn]


class ConversationListItemV1(TypedDict):
    """One conversation of LCORE's `/v1/conversations` list (`ConversationDetails`)."""
    conversation_id: str
    created_at: str
    last_message_at: str
    message_count: int
    last_used_model: str | None
    last_used_provider: str | None
    topic_summary: str | None


class ConversationListItemV2(TypedDict):
    """One conversation of LCORE's `/v2/conversations` list (the conversation cache's)."""
    conversation_id: str
    topic_summary: str | None
    last_message_timestamp: float


class ConversationList(TypedDict):
    """LCORE's `ConversationsListResponse`, its items in the audience's version."""
    conversations: list[ConversationListItemV1 | ConversationListItemV2]


class ConversationDeleted(TypedDict):
    """LCORE's `ConversationDeleteResponse`."""
    conversation_id: str
    deleted: bool
    response: str
    success: Literal[True]


class ConversationUpdated(TypedDict):
    """LCORE's `ConversationUpdateResponse`."""
    conversation_id: str
    success: Literal[True]
    message: str


def chat_turn(turn: TurnView) -> ChatTurn:
    """LCORE's `ConversationTurn`: the user's and the assistant's message, the turn's
    tool calls and results, provider, model and times."""
    calls, results, _ = summaries(turn.items)
    documents = referenced_documents(turn.items)
    return {"messages": [{"content": turn.question, "type": "user", "referenced_documents": None},
                         {"content": turn.answer, "type": "assistant", "referenced_documents": documents or None}],
            "tool_calls": calls, "tool_results": results, "provider": turn.provider,
            "model": bare_model(turn.model, turn.provider),
            "started_at": zulu_seconds(turn.started_at), "completed_at": zulu_seconds(turn.completed_at)}


class LcoreV1:
    """`/v1/conversations` (LCORE's database-backed API)."""

    version = "v1"

    def list_item(self, row: Mapping[str, Any]) -> ConversationListItemV1 | ConversationListItemV2:
        return {"conversation_id": row["id"], "created_at": naive_seconds(row["created_at"]),
                "last_message_at": naive_seconds(row["last_message_at"]), "message_count": row["message_count"],
                "last_used_model": bare_model(row["last_used_model"], row["last_used_provider"]),
                "last_used_provider": row["last_used_provider"],
                "topic_summary": row["topic_summary"]}

    def listing(self, rows: Iterable[Mapping[str, Any]]) -> ConversationList:
        return {"conversations": [self.list_item(row) for row in rows]}

    def conversation(self, conversation_id: str, turns: Iterable[TurnView]) -> ConversationDetails:
        return {"conversation_id": conversation_id, "chat_history": [chat_turn(turn) for turn in turns]}

    def deleted(self, conversation_id: str, deleted: bool) -> ConversationDeleted:
        # `success` is deprecated in LCORE and always true.
        return {"conversation_id": conversation_id, "deleted": deleted,
                "response": DELETED if deleted else NOT_DELETED, "success": True}

    def updated(self, conversation_id: str) -> ConversationUpdated:
        return {"conversation_id": conversation_id, "success": True, "message": UPDATED}


class LcoreV2(LcoreV1):
    """`/v2/conversations` (LCORE's conversation cache): the same bodies but the list's."""

    version = "v2"

    def list_item(self, row: Mapping[str, Any]) -> ConversationListItemV1 | ConversationListItemV2:
        return {"conversation_id": row["id"], "topic_summary": row["topic_summary"],
                "last_message_timestamp": epoch(row["last_message_at"])}


LCORE_V1 = LcoreV1()
LCORE_V2 = LcoreV2()
