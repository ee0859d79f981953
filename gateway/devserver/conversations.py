"""Conversations API of the Llama Stack stand-in (/v1/conversations...).

Ids are `conv_` + 48 lowercase hex; a malformed id is a 400, an unknown one a 404.
Items are kept in insertion order. Llama Stack 0.7.3 times each item in whole seconds
(the items a conversation is created with: now; each add-items call's: now + index) and
lists them sorted by that time, so an add within a few seconds of an earlier add of
several items lands among them: with `--llama-stack-items` (`ServerState.llama_stack_items`)
that is reproduced (`Conversation.append`, `Conversation.ordered`). Listing defaults to
newest first; without `limit` every item is returned.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from .items import conversation_item
from .shapes import detail, json_response, validation_error
from .state import STATE
from .store import CONVERSATION_ID_RE, Conversation
from .validation import json_invalid, not_an_object


async def _body(request: web.Request) -> dict[str, Any] | web.Response:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return validation_error(json_invalid(exc.pos))
    if not isinstance(body, dict):
        return validation_error(not_an_object())
    return body


def _lookup(request: web.Request) -> Conversation | web.Response:
    conv_id = request.match_info["conversation_id"]
    if not CONVERSATION_ID_RE.fullmatch(conv_id):
        return detail(f"Invalid value for 'conversation_id': {conv_id}. Conversation ID must "
                      "match format 'conv_' followed by 48 lowercase hex characters.", 400)
    conv = request.app[STATE].conversations.get(conv_id)
    if conv is None:
        return detail(f"Conversation '{conv_id}' not found.", 404)
    return conv


def _check_items(items: Any) -> web.Response | None:
    if not isinstance(items, list):
        return validation_error([{"loc": ["body", "items"], "msg": "Input should be a valid "
                                  "list", "type": "list_type"}])
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return validation_error([{"loc": ["body", "items", i], "msg": "Input should be a "
                                      "valid dictionary or object to extract fields from",
                                      "type": "model_attributes_type"}])
    return None


def _item_list(items: list[dict[str, Any]], has_more: bool = False) -> web.Response:
    return json_response({"object": "list", "data": items,
                          "first_id": items[0]["id"] if items else None,
                          "last_id": items[-1]["id"] if items else None,
                          "has_more": has_more})


async def create(request: web.Request) -> web.Response:
    body = await _body(request)
    if isinstance(body, web.Response):
        return body
    items = body.get("items") or []
    bad = _check_items(items)
    if bad is not None:
        return bad
    state = request.app[STATE]
    conv = state.conversations.create(body.get("metadata"))
    conv.append([conversation_item(item) for item in items], state.llama_stack_items, step=0)
    return json_response(conv.as_json())


async def get(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    return json_response(conv.as_json())


async def update(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    body = await _body(request)
    if isinstance(body, web.Response):
        return body
    if "metadata" not in body:
        return validation_error([{"loc": ["body", "metadata"], "msg": "Field required",
                                  "type": "missing"}])
    conv.metadata = body["metadata"]
    return json_response(conv.as_json())


async def delete(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    request.app[STATE].conversations.delete(conv.id)
    return json_response({"id": conv.id, "object": "conversation.deleted", "deleted": True})


async def add_items(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    body = await _body(request)
    if isinstance(body, web.Response):
        return body
    if "items" not in body:
        return validation_error([{"loc": ["body", "items"], "msg": "Field required",
                                  "type": "missing"}])
    bad = _check_items(body["items"])
    if bad is not None:
        return bad
    added = [conversation_item(item) for item in body["items"]]
    conv.append(added, request.app[STATE].llama_stack_items)
    return _item_list(added)


async def list_items(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    items = conv.ordered()
    if request.query.get("order", "desc") != "asc":
        items.reverse()
    after = request.query.get("after")
    if after:
        ids = [item.get("id") for item in items]
        if after in ids:
            items = items[ids.index(after) + 1:]
    has_more = False
    raw_limit = request.query.get("limit")
    if raw_limit is not None:
        try:
            limit = max(int(raw_limit), 0)
        except ValueError:
            limit = len(items)
        has_more = len(items) > limit
        items = items[:limit]
    return _item_list(items, has_more)


def _find_item(conv: Conversation, item_id: str) -> int | None:
    for index, item in enumerate(conv.items):
        if item.get("id") == item_id:
            return index
    return None


def _item_not_found(conv: Conversation, item_id: str) -> web.Response:
    return detail(f"Item '{item_id}' not found in conversation '{conv.id}'.", 404)


async def get_item(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    item_id = request.match_info["item_id"]
    index = _find_item(conv, item_id)
    if index is None:
        return _item_not_found(conv, item_id)
    return json_response(conv.items[index])


async def delete_item(request: web.Request) -> web.Response:
    conv = _lookup(request)
    if isinstance(conv, web.Response):
        return conv
    item_id = request.match_info["item_id"]
    index = _find_item(conv, item_id)
    if index is None:
        return _item_not_found(conv, item_id)
    del conv.items[index]
    return json_response({"id": item_id, "object": "conversation.item.deleted",
                          "deleted": True})
