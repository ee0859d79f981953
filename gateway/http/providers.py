"""LCORE's `GET /v1/providers` and `GET /v1/providers/{provider_id}`: the upstream's
providers, asked of it on every call (an unreachable upstream is LCORE's 503).

The list is grouped by API with only each provider's id and type, as LCORE groups it;
one provider is its `api`, `config`, `health`, `provider_id` and `provider_type` as the
upstream reports them (Llama Stack masks its providers' secrets itself). Llama Stack
answers an unknown provider with 400, which LCORE turns into its 404. An upstream with no
providers API at all (a Chat Completions server under the local engine) is a 501."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web

from gateway.http.responses_io import json_response
from gateway.http.services import SERVICES
from gateway.schema.errors import ApiError, not_found
from gateway.upstream.client import Reply

PATH = "/v1/providers"
PROVIDER_FIELDS = ("api", "config", "health", "provider_id", "provider_type")


def no_providers_api() -> ApiError:
    return ApiError(501, "Not implemented", "The upstream has no providers API (GET /v1/providers).",
                    code="providers_not_available")


def _body(reply: Reply) -> Any:
    try:
        return reply.json()
    except ValueError:
        raise ApiError(502, "Invalid upstream response", "The upstream's providers answer is not JSON.",
                       code="upstream_invalid_response") from None


def grouped(providers: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """LCORE's `group_providers`: API type -> [{provider_id, provider_type}], in the
    upstream's order."""
    result: dict[str, list[dict[str, Any]]] = {}
    for provider in providers:
        if isinstance(provider, dict) and isinstance(provider.get("api"), str):
            result.setdefault(provider["api"], []).append(
                {"provider_id": provider.get("provider_id"), "provider_type": provider.get("provider_type")})
    return result


async def list_providers(request: web.Request) -> web.Response:
    upstream = request.app[SERVICES].upstream
    reply = await upstream.request("GET", PATH, timeout=10)
    if reply.status == 404:
        raise no_providers_api()
    if not reply.ok:
        raise upstream.error(reply.status, reply.body)
    body = _body(reply)
    data = body.get("data") if isinstance(body, dict) else None
    return json_response({"providers": grouped(data if isinstance(data, list) else [])})


async def get_provider(request: web.Request) -> web.Response:
    provider_id = request.match_info["provider_id"]
    upstream = request.app[SERVICES].upstream
    reply = await upstream.request("GET", f"{PATH}/{quote(provider_id, safe='')}", timeout=10)
    if reply.status == 400:   # Llama Stack's answer for an unknown provider; LCORE's 404
        raise not_found("Provider", provider_id, code="provider_not_found", param="provider_id")
    if reply.status == 404:
        raise no_providers_api()
    if not reply.ok:
        raise upstream.error(reply.status, reply.body)
    body = _body(reply)
    if not isinstance(body, dict):
        raise ApiError(502, "Invalid upstream response", "The upstream's provider is not an object.",
                       code="upstream_invalid_response")
    return json_response({name: body.get(name) for name in PROVIDER_FIELDS})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}{PATH}", list_providers)
    app.router.add_get(f"{prefix}{PATH}/{{provider_id}}", get_provider)
