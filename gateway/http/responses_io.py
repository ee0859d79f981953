"""Small helpers every handler uses to read requests and write JSON."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.identity import Identity
from gateway.schema.json_body import MAX_JSON_ITEMS as DEFAULT_MAX_JSON_ITEMS, parse_json_body

# `service.max_json_items`, set by the wiring (`app.py`).
MAX_JSON_ITEMS: web.AppKey[int] = web.AppKey("max_json_items", int)


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json",
                        headers=headers)


async def read_json(request: web.Request) -> Any:
    """The decoded body (FastAPI's 422 when it is empty, not JSON or holds more items
    than `service.max_json_items`); a body over the limit raises 413 in aiohttp's read()."""
    return parse_json_body(await request.read(), request.app.get(MAX_JSON_ITEMS, DEFAULT_MAX_JSON_ITEMS))


def identity(request: web.Request) -> Identity:
    found: Identity = request["identity"]   # set by the middleware
    return found
