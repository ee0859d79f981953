"""The helpers every handler reads requests and writes JSON with: the body decoded under
the application's `service.max_json_items` (FastAPI's 422 otherwise), JSON answers."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from gateway.http.responses_io import MAX_JSON_ITEMS, identity, json_response, read_json
from gateway.identity import Identity
from gateway.schema.errors import ApiError


def test_json_response_is_compact_json_with_status_and_headers():
    response = json_response({"a": [1, "é"]}, 201, {"X-Extra": "1"})
    assert response.status == 201
    assert response.content_type == "application/json"
    assert response.body == orjson.dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert response.headers["X-Extra"] == "1"


async def echo(request: web.Request) -> web.Response:
    try:
        return json_response({"got": await read_json(request)})
    except ApiError as exc:   # what the middleware would answer
        return json_response(exc.body(False), exc.status)


@pytest.fixture
async def client(aiohttp_client):
    async def make(max_items: int | None):
        app = web.Application()
        if max_items is not None:
            app[MAX_JSON_ITEMS] = max_items
        app.router.add_post("/", echo)
        return await aiohttp_client(app)
    return make


async def test_read_json_decodes_the_body(client):
    http = await client(None)
    response = await http.post("/", data=b'{"input": ["a", "b"]}')
    assert response.status == 200 and await response.json() == {"got": {"input": ["a", "b"]}}


async def test_an_empty_or_broken_body_is_fastapis_422(client):
    http = await client(None)
    empty = await http.post("/", data=b"")
    assert empty.status == 422
    assert (await empty.json())["detail"][0]["loc"] == ["body"]
    broken = await http.post("/", data=b'{"input": ')
    assert broken.status == 422
    assert (await broken.json())["detail"][0]["type"] == "json_invalid"


async def test_the_item_limit_is_the_applications(client):
    body = orjson.dumps({"input": list(range(50))})
    # Without the key the default (200,000) applies; with it, the operator's limit.
    assert (await (await client(None)).post("/", data=body)).status == 200
    limited = await (await client(10)).post("/", data=body)
    assert limited.status == 422
    error = (await limited.json())["detail"][0]
    assert error["type"] == "json_invalid" and "at most 10 arrays" in error["ctx"]["error"]


def test_identity_is_what_the_middleware_set():
    caller = Identity(user_id="u1", username="ann")
    assert identity({"identity": caller}) is caller   # type: ignore[arg-type]
