"""OpenAI's Conversations API bodies (sans-I/O, issue 23): the `Conversation` object,
its deletion, conversation items as the gateway keeps them, and the items' cursor page.
The `openai` package's `types/conversations` are the contract.

On the paths LCORE also serves (`GET` and `DELETE /v1/conversations/{id}`) one body
serves both audiences: OpenAI's keys beside LCORE's (`union`), unless the operator
asked for LCORE's bodies alone (`service.error_body: lcore`).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, TypedDict

from gateway.legacy.conversations import epoch
from gateway.schema.ids import new_item_id, openai_conversation_id
from gateway.schema.error_list import request_validation_error
from gateway.schema.errors import ErrorEntry

MAX_PAGE = 100
DEFAULT_PAGE = 20
# What a message's text parts are called, by role (OpenAI's `Message` content).
_TEXT_PART = {"assistant": "output_text"}
_PREFIX = {"compaction": "cmp"}   # OpenAI's (and `/v1/responses/compact`'s) ids


class Conversation(TypedDict):
    """OpenAI's `Conversation` (`openai.types.conversations.Conversation`)."""
    id: str
    object: Literal["conversation"]
    created_at: int
    metadata: dict[str, str]


class ConversationDeleted(TypedDict):
    """OpenAI's `ConversationDeletedResource`."""
    id: str
    object: Literal["conversation.deleted"]
    deleted: bool


class ItemList(TypedDict):
    """OpenAI's `ConversationItemList`: a page of items (each as the upstream or the
    gateway keeps it)."""
    object: Literal["list"]
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool


def conversation(conversation_id: str, created_at: str, metadata: Mapping[str, str] | None) -> Conversation:
    """OpenAI's `Conversation`."""
    return {"id": openai_conversation_id(conversation_id), "object": "conversation",
            "created_at": int(epoch(created_at)), "metadata": dict(metadata or {})}


def deleted(conversation_id: str, was_deleted: bool) -> ConversationDeleted:
    """OpenAI's `ConversationDeletedResource`."""
    return {"id": openai_conversation_id(conversation_id), "object": "conversation.deleted", "deleted": was_deleted}


def union(openai: Conversation | ConversationDeleted, lcore: Mapping[str, Any]) -> dict[str, Any]:
    """Both audiences' keys in one body; where both have a key (`deleted`) they agree."""
    return {**openai, **lcore}


def normalized(raw: dict[str, Any]) -> dict[str, Any]:
    """An item a client added, in OpenAI's shape: `type` `message` when none is given,
    a message's text content as OpenAI's parts (what the SDK's models read back). What
    else it holds is the turn's input as sent (its backend judges it then)."""
    item = dict(raw)
    item.setdefault("type", "message")
    if item["type"] == "message" and isinstance(item.get("content"), str):
        item["content"] = [{"type": _TEXT_PART.get(str(item.get("role")), "input_text"), "text": item["content"]}]
    return item


def new_item(raw: dict[str, Any]) -> dict[str, Any]:
    """An item as the gateway keeps and lists it: normalized, with a new id (and a
    message's `status`)."""
    item = normalized(raw)
    if item["type"] == "message":
        item.setdefault("status", "completed")
        prefix = "msg"
    else:
        prefix = _PREFIX.get(item["type"]) or str(item["type"]).split("_", 1)[0][:8] or "item"
    item["id"] = new_item_id(prefix)
    return item


def item_list(data: list[dict[str, Any]], has_more: bool = False) -> ItemList:
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


def _invalid(loc: str, raw: str, message: str, kind: str, ctx: dict[str, Any] | None = None) -> Exception:
    error: ErrorEntry = {"type": kind, "loc": ["query", loc], "input": raw, "msg": message}
    if ctx:
        error["ctx"] = ctx
    return request_validation_error([error])


def page_query(query: Mapping[str, str]) -> tuple[str | None, int, str]:
    """`after`, `limit` (1-100, default 20) and `order` (`asc`/`desc`, default `desc`);
    `include[]` is accepted (the gateway's items carry everything already)."""
    limit = DEFAULT_PAGE
    if "limit" in query:
        raw = query["limit"]
        try:
            limit = int(raw)
        except ValueError:
            raise _invalid("limit", raw, "Input should be a valid integer, unable to parse string as an integer",
                           "int_parsing") from None
        if limit < 1:
            raise _invalid("limit", raw, "Input should be greater than or equal to 1", "greater_than_equal", {"ge": 1})
        if limit > MAX_PAGE:
            raise _invalid("limit", raw, f"Input should be less than or equal to {MAX_PAGE}", "less_than_equal",
                           {"le": MAX_PAGE})
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise _invalid("order", order, "Input should be 'asc' or 'desc'", "literal_error",
                       {"expected": "'asc' or 'desc'"})
    return query.get("after"), limit, order


def page(items: list[dict[str, Any]], after: str | None, limit: int, order: str) -> ItemList:
    """One page of a conversation's items (oldest first as given)."""
    ordered = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [item.get("id") for item in ordered]
        ordered = ordered[ids.index(after) + 1:] if after in ids else []
    return item_list(ordered[:limit], has_more=len(ordered) > limit)
