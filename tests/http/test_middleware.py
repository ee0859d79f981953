"""The one middleware, on a small application with public routes (authentication and
authorization through `gateway serve` are in tests/e2e/test_authorization.py): request
ids, the error envelope for every way a request fails, header size, CORS."""

from __future__ import annotations

import re

import pytest
from aiohttp import web

from gateway.config import AuthenticationConfig, ServiceConfig
from gateway.http.middleware import gateway_middleware, request_id
from gateway.http.services import PUBLIC
from gateway.schema.errors import invalid_attribute

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_a_plain_client_request_id_is_kept_anything_else_replaced():
    assert request_id("abc-1.2_3") == "abc-1.2_3"
    made = [request_id(header) for header in (None, "", "a b", "x" * 129, "id\r\nX-Injected: 1", "ü")]
    assert all(UUID4.fullmatch(made_id) for made_id in made)
    assert len(set(made)) == len(made)   # each request its own


async def ok(request: web.Request) -> web.Response:
    return web.json_response({"request_id": request["request_id"]})


async def refuse(request: web.Request) -> web.Response:
    raise invalid_attribute("no such thing", param="thing")


async def crash(request: web.Request) -> web.Response:
    raise RuntimeError("secret detail")


@pytest.fixture
async def client(aiohttp_client):
    async def make(**service):
        app = web.Application(middlewares=[gateway_middleware(
            ServiceConfig.model_validate(service), AuthenticationConfig(), {})])
        app.router.add_get("/ok", ok)
        app.router.add_post("/v1/responses", refuse)
        app.router.add_post("/v1/query", refuse)
        app.router.add_get("/crash", crash)
        app[PUBLIC] = frozenset({ok, refuse, crash})
        return await aiohttp_client(app)
    return make


async def test_the_request_id_is_answered_and_seen_by_the_handler(client):
    http = await client()
    kept = await http.get("/ok", headers={"X-Request-ID": "client-7"})
    assert kept.headers["X-Request-ID"] == "client-7" and (await kept.json())["request_id"] == "client-7"
    made = await http.get("/ok", headers={"X-Request-ID": "not ok"})
    assert UUID4.fullmatch(made.headers["X-Request-ID"]) and (await made.json())["request_id"] == made.headers[
        "X-Request-ID"]


async def test_openai_paths_carry_openais_error_object_lcores_do_not(client):
    http = await client()
    openai = await (await http.post("/v1/responses")).json()
    assert openai["detail"] == {"response": "Invalid attribute value", "cause": "no such thing"}
    assert openai["error"]["param"] == "thing" and openai["error"]["type"] == "invalid_request_error"
    assert await (await http.post("/v1/query")).json() == {"detail": openai["detail"]}
    lcore_only = await client(error_body="lcore")
    assert "error" not in await (await lcore_only.post("/v1/responses")).json()


async def test_aiohttps_own_refusals_are_fastapis_bodies(client):
    http = await client()
    missing = await http.get("/nowhere")
    assert missing.status == 404 and await missing.json() == {"detail": "Not Found"}
    wrong = await http.delete("/ok")
    assert wrong.status == 405 and wrong.headers["Allow"] == "GET,HEAD"
    assert (await wrong.json())["detail"] == "Method Not Allowed"


async def test_an_unexpected_error_is_a_500_that_says_nothing_of_it(client):
    http = await client()
    response = await http.get("/crash")
    assert response.status == 500 and "X-Request-ID" in response.headers
    assert "secret detail" not in await response.text()


async def test_a_header_over_the_limit_is_431_in_the_envelope(client):
    http = await client(max_header_bytes=1024)
    assert (await http.get("/ok", headers={"X-Big": "x" * 900})).status == 200
    big = await http.get("/ok", headers={"X-Big": "x" * 1100})
    assert big.status == 431
    assert (await big.json())["detail"]["cause"] == "A request header exceeds the limit of 1024 bytes."


async def test_cors_answers_only_allowed_origins(client):
    http = await client(cors={"allow_origins": ["https://app.example"], "allow_methods": ["GET", "POST"],
                              "allow_headers": ["Authorization"]})
    allowed = await http.get("/ok", headers={"Origin": "https://app.example"})
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert allowed.headers["Vary"] == "Origin"
    other = await http.get("/ok", headers={"Origin": "https://evil.example"})
    assert other.status == 200 and "Access-Control-Allow-Origin" not in other.headers
    preflight = await http.options("/ok", headers={"Origin": "https://app.example",
                                                   "Access-Control-Request-Method": "POST"})
    assert preflight.status == 204
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert preflight.headers["Access-Control-Allow-Headers"] == "Authorization"
    refused = await http.options("/ok", headers={"Origin": "https://evil.example",
                                                 "Access-Control-Request-Method": "POST"})
    assert refused.status == 403


async def test_any_origin_is_echoed_as_a_star_without_credentials(client):
    http = await client()
    response = await http.get("/ok", headers={"Origin": "https://any.example"})
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in response.headers
