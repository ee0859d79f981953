"""Stored responses in engine mode: read from the gateway's own response store, each
scoped to the caller (another user's response is a 404, as a missing one).

`GET /v1/responses/{id}` works during a stream (the row is written at creation and
after each tool round: `in_progress` with the items so far). Lists are OpenAI's
cursor pages: `after`, `limit` (1-100, default 20), `order` (`desc` default).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.http.responses_io import identity, json_response
from gateway.http.services import SERVICES
from gateway.schema.errors import invalid_attribute, not_found
from gateway.storage.responses import ResponseStore, StoredResponse
from gateway.streaming.enrich import output_text


def _store(request: web.Request) -> ResponseStore:
    engine = request.app[SERVICES].pipeline.engine
    assert engine is not None
    return engine.store


async def _owned(request: web.Request) -> StoredResponse:
    response_id = request.match_info["response_id"]
    found = await _store(request).get(response_id, identity(request).user_id)
    if found is None:
        raise not_found("Response", response_id, code="response_not_found")
    return found


def _shown(response: dict[str, Any]) -> dict[str, Any]:
    return {**response, "output_text": output_text(response)}


async def get_response(request: web.Request) -> web.Response:
    return json_response(_shown((await _owned(request)).response))


async def delete_response(request: web.Request) -> web.Response:
    found = await _owned(request)
    services = request.app[SERVICES]
    # The turn's record too, so its conversation continues from the turn before it.
    await services.pipeline.owned_turn(identity(request), found.id)  # waits for a pending record
    await _store(request).delete(found.id, found.user_id)
    await services.conversations.delete_turn(found.id)
    return json_response({"id": found.id, "object": "response", "deleted": True})


def _page(request: web.Request) -> tuple[str | None, int, bool]:
    query = request.query
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise invalid_attribute("limit must be an integer between 1 and 100", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid_attribute("order must be 'asc' or 'desc'", param="order")
    return query.get("after") or None, limit, order == "desc"


def _listing(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


async def list_input_items(request: web.Request) -> web.Response:
    items = (await _owned(request)).input
    after, limit, descending = _page(request)
    ordered = list(reversed(items)) if descending else items
    if after is not None:
        position = next((index for index, item in enumerate(ordered) if item.get("id") == after), None)
        if position is None:
            raise not_found("Item", after, code="item_not_found", param="after")
        ordered = ordered[position + 1:]
    return json_response(_listing(ordered[:limit], len(ordered) > limit))


async def list_responses(request: web.Request) -> web.Response:
    after, limit, descending = _page(request)
    page = await _store(request).list(identity(request).user_id, after=after, limit=limit, descending=descending)
    if page is None:
        raise not_found("Response", after, code="response_not_found", param="after")
    return json_response(_listing([_shown(response) for response in page[0]], page[1]))
