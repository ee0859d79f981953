"""`POST /authorized`: who the gateway authenticated the caller as (LCORE's endpoint;
any authenticated caller may use it, whatever `access_rules` say)."""

from __future__ import annotations

from aiohttp import web

from gateway.http.responses_io import identity, json_response


async def authorized(request: web.Request) -> web.Response:
    caller = identity(request)
    return json_response({"user_id": caller.user_id, "username": caller.username,
                          "skip_userid_check": caller.skip_userid_check})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_post(f"{prefix}/authorized", authorized)
