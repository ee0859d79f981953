"""GET/DELETE of stored responses: get, list, input_items, delete, cancel."""

from __future__ import annotations

from aiohttp import web

from .shapes import detail, json_response, response_not_found
from .state import STATE

DEFAULT_LIST_LIMIT = 50


def _limit(request: web.Request, default: int | None) -> int | None:
    raw = request.query.get("limit")
    if raw is None:
        return default
    try:
        return max(int(raw), 0)
    except ValueError:
        return default


async def get_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    record = request.app[STATE].responses.get(response_id)
    if record is None:
        return response_not_found(response_id)
    return json_response(record.response)


async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    if not request.app[STATE].responses.delete(response_id):
        return response_not_found(response_id)
    return json_response({"id": response_id, "object": "response", "deleted": True})


async def input_items(request: web.Request) -> web.Response:
    """Newest first by default: this turn's input, then the replayed earlier items."""
    response_id = request.match_info["response_id"]
    record = request.app[STATE].responses.get(response_id)
    if record is None:
        return response_not_found(response_id)
    items = list(record.input)
    if request.query.get("order", "desc") != "asc":
        items.reverse()
    limit = _limit(request, None)
    if limit is not None:
        items = items[:limit]
    return json_response({"data": items, "object": "list"})


async def list_responses(request: web.Request) -> web.Response:
    limit = _limit(request, DEFAULT_LIST_LIMIT) or DEFAULT_LIST_LIMIT
    records, has_more = request.app[STATE].responses.page(
        limit=limit, after=request.query.get("after"), order=request.query.get("order", "desc"),
        model=request.query.get("model"))
    # List entries carry their input items too (responses-list.json).
    data = [{**r.response, "input": r.input} for r in records]
    return json_response({"data": data, "has_more": has_more,
                          "first_id": data[0]["id"] if data else None,
                          "last_id": data[-1]["id"] if data else None, "object": "list"})


async def cancel_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    record = request.app[STATE].responses.get(response_id)
    if record is None:
        return response_not_found(response_id)
    if not record.response.get("background"):
        return detail(f"Cannot cancel response '{response_id}': only background responses "
                      "can be cancelled", 409)
    # Background turns finish at once here, so there is never anything left to cancel.
    return json_response(record.response)
