"""The quota API (LCORE issue #542): `GET /v1/quotas` (the caller's limiters and
balances); with `admin`, a user's or the cluster's balances (`GET`/`PUT`), increments
(`POST …/increments`, idempotent with the `Idempotency-Key` header) and the usage
report from the token history. The route's action is checked by the middleware
(`OPERATIONS`); the work is `quota/admin.py`."""

from __future__ import annotations

from aiohttp import web
from pydantic import TypeAdapter

from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES
from gateway.quota.admin import Kind, QuotaAdmin
from gateway.schema.errors import bad_request
from gateway.schema.quota_api import QuotaChange
from gateway.schema.fail_fast import validate

_CHANGE = TypeAdapter(QuotaChange)


def _admin(request: web.Request) -> QuotaAdmin:
    return QuotaAdmin(request.app[SERVICES].quota)


def _subject(request: web.Request) -> tuple[Kind, str]:
    user_id = request.match_info.get("user_id")
    return ("user_limiter", user_id) if user_id is not None else ("cluster_limiter", "")


async def own_quotas(request: web.Request) -> web.Response:
    """The caller's user limiters and the cluster's, in configuration order."""
    admin = _admin(request)
    mine = await admin.describe("user_limiter", identity(request).user_id)
    cluster = await admin.describe("cluster_limiter", "")
    limiters = mine["limiters"] + cluster["limiters"]
    order = {limiter.name: index for index, limiter in enumerate(request.app[SERVICES].quota.limiters)}
    limiters.sort(key=lambda entry: order[entry["name"]])
    return json_response({**mine, "available_quotas": {entry["name"]: entry["available"] for entry in limiters},
                          "limiters": limiters})


async def get_quotas(request: web.Request) -> web.Response:
    kind, subject = _subject(request)
    return json_response(await _admin(request).describe(kind, subject))


async def set_quotas(request: web.Request) -> web.Response:
    return await _change(request, add=False)


async def add_quotas(request: web.Request) -> web.Response:
    return await _change(request, add=True)


async def _change(request: web.Request, add: bool) -> web.Response:
    key = request.headers.get("Idempotency-Key")
    if add and not key:
        raise bad_request("An Idempotency-Key header is required: a retried increment must not add twice",
                          code="missing_idempotency_key")
    change = validate(_CHANGE, await read_json(request))
    kind, subject = _subject(request)
    admin = _admin(request)
    applied = await admin.change(kind, subject, change.limiters, add=add, admin=identity(request).user_id,
                                 idempotency_key=key if add else None, request_id=request.get("request_id"))
    return json_response(await admin.describe(kind, subject, applied if add else None))


async def usage_report(request: web.Request) -> web.Response:
    query = request.query
    return json_response(await _admin(request).usage(query.get("start"), query.get("end"), query.get("user_id")))


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/v1/quotas", own_quotas)
    app.router.add_get(f"{prefix}/v1/quotas/usage", usage_report)
    app.router.add_get(f"{prefix}/v1/quotas/cluster", get_quotas)
    app.router.add_put(f"{prefix}/v1/quotas/cluster", set_quotas)
    app.router.add_post(f"{prefix}/v1/quotas/cluster/increments", add_quotas)
    app.router.add_get(f"{prefix}/v1/quotas/users/{{user_id}}", get_quotas)
    app.router.add_put(f"{prefix}/v1/quotas/users/{{user_id}}", set_quotas)
    app.router.add_post(f"{prefix}/v1/quotas/users/{{user_id}}/increments", add_quotas)
