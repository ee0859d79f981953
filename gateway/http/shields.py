"""LCORE's `GET /v1/shields`: the configured shields (`turns/shields.py`)."""

from __future__ import annotations

from aiohttp import web

from gateway.http.responses_io import json_response
from gateway.http.services import SERVICES
from gateway.turns.shields import Shields


async def list_shields(request: web.Request) -> web.Response:
    return json_response(Shields(request.app[SERVICES].config).listing())


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/v1/shields", list_shields)
