"""Small helpers every handler uses to read requests and write JSON."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway.identity import Identity
from gateway.schema.errors import validation_error


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json",
                        headers=headers)


async def read_json(request: web.Request) -> Any:
    """The decoded body; a body over the limit raises 413 in aiohttp's read()."""
    body = await request.read()
    if not body.strip():
        raise validation_error("The request body is empty; a JSON object is required.", code="invalid_body")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise validation_error(f"The request body is not valid JSON ({exc}).", code="invalid_json") from None


def identity(request: web.Request) -> Identity:
    return request["identity"]
