"""Small helpers every handler uses to read requests and write JSON."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.identity import Identity
from gateway.schema.validation import parse_json_body


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json",
                        headers=headers)


async def read_json(request: web.Request) -> Any:
    """The decoded body (FastAPI's 422 when it is empty or not JSON); a body over the
    limit raises 413 in aiohttp's read()."""
    return parse_json_body(await request.read())


def identity(request: web.Request) -> Identity:
    return request["identity"]
