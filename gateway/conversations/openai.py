"""OpenAI's Conversations API bodies (sans-I/O, issue 23): the `Conversation` object,
its deletion, conversation items as the gateway keeps them, and the items' cursor page.
The `openai` package's `types/conversations` are the contract: every item the API
answers, kept by the gateway or relayed from the upstream, is `shaped` into its
`ConversationItem` (issue 41), as `streaming/repair.py` repairs Llama Stack's streams.

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
from gateway.schema.json_types import JsonObject
from gateway.streaming.repair import repair_item

MAX_PAGE = 100
DEFAULT_PAGE = 20
# What a message's text parts are called, by role (OpenAI's `Message` content).
_TEXT_PART = {"assistant": "output_text"}
_PREFIX = {"compaction": "cmp"}   # OpenAI's (and `/v1/responses/compact`'s) ids
# Items whose `ConversationItem` class requires a `status`, which Llama Stack 0.7.3 leaves
# null on the input items it keeps (a turn's, and those added through the API).
_STATUS_REQUIRED = frozenset({"message", "function_call", "function_call_output", "file_search_call",
                              "web_search_call"})


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


def union(openai: Conversation | ConversationDeleted, lcore: Mapping[str, Any]) -> JsonObject:
    """Both audiences' keys in one body; where both have a key (`deleted`) they agree."""
    return {**openai, **lcore}


def _text_part(role: Any, text: Any) -> dict[str, Any]:
    """A message's text as OpenAI's part for its role; `output_text` with its (required)
    `annotations`."""
    kind = _TEXT_PART.get(str(role), "input_text")
    return {"type": kind, "text": text, "annotations": []} if kind == "output_text" else {"type": kind, "text": text}


def _shaped_content(item: dict[str, Any]) -> None:
    content = item.get("content")
    if isinstance(content, str):
        item["content"] = [_text_part(item.get("role"), content)]
    elif isinstance(content, list):
        for part in content:
            # Without `annotations` the SDK's content union reads an `output_text` part as
            # another class (the text is lost to a typed client).
            if isinstance(part, dict) and part.get("type") == "output_text" \
                    and not isinstance(part.get("annotations"), list):
                part["annotations"] = []


def shaped(item: Any) -> Any:
    """An item as the `openai` package's `ConversationItem` has it, repaired in place:
    a message's string content as its role's parts, `output_text` parts with their
    `annotations`, a null or missing `status` where one is required as `completed`
    (Llama Stack 0.7.3 keeps input items with `status: null`; an item is listed once
    it is done), an `mcp_call`'s error as its object (`streaming/repair.py`)."""
    if not isinstance(item, dict):
        return item
    kind = item.get("type")
    if kind == "message":
        _shaped_content(item)
    if kind in _STATUS_REQUIRED and item.get("status") is None:
        item["status"] = "completed"
    return repair_item(item)


def shaped_list(listing: Any) -> Any:
    """A page of items from the upstream, its items `shaped`."""
    if isinstance(listing, dict) and isinstance(listing.get("data"), list):
        for item in listing["data"]:
            shaped(item)
    return listing


def normalized(raw: dict[str, Any]) -> dict[str, Any]:
    """An item a client added, in OpenAI's shape: `type` `message` when none is given,
    a message's text content as OpenAI's parts (what the SDK's models read back). What
    else it holds is the turn's input as sent (its backend judges it then)."""
    item = dict(raw)
    item.setdefault("type", "message")
    if item["type"] == "message":
        if isinstance(item.get("content"), list):
            item["content"] = [dict(part) if isinstance(part, dict) else part for part in item["content"]]
        _shaped_content(item)
    return item


def new_item(raw: JsonObject) -> JsonObject:
    """An item as the gateway keeps and lists it: normalized, with a new id (and the
    `status` its class requires)."""
    item = normalized(raw)
    shaped(item)
    if item["type"] == "message":
        prefix = "msg"
    else:
        prefix = _PREFIX.get(item["type"]) or str(item["type"]).split("_", 1)[0][:8] or "item"
    item["id"] = new_item_id(prefix)
    return item


def item_list(data: list[JsonObject], has_more: bool = False) -> ItemList:
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


def page(items: list[JsonObject], after: str | None, limit: int, order: str) -> ItemList:
    """One page of a conversation's items (oldest first as given)."""
    ordered = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [item.get("id") for item in ordered]
        ordered = ordered[ids.index(after) + 1:] if after in ids else []
    return item_list(ordered[:limit], has_more=len(ordered) > limit)
