"""LCORE's `GET /v1/config`: the running configuration, `{"configuration": {...}}`, every
secret masked (`config/masked.py`). Its action is `get_config`, which only an operator's
rules should grant."""

from __future__ import annotations

from aiohttp import web

from gateway.config.masked import masked
from gateway.http.responses_io import json_response
from gateway.http.services import SERVICES


async def get_config(request: web.Request) -> web.Response:
    return json_response({"configuration": masked(request.app[SERVICES].config)})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/v1/config", get_config)
