"""LCORE's `GET /v1/tools` and `GET /v1/mcp-auth/client-options` (`turns/tool_catalog.py`)."""

from __future__ import annotations

from aiohttp import web

from gateway.http.responses_io import identity, json_response
from gateway.http.services import SERVICES
from gateway.turns.tool_catalog import ToolCatalog


async def list_tools(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    catalog = ToolCatalog(services.tools, services.upstream)
    return json_response(await catalog.list(identity(request), request.headers))


async def client_options(request: web.Request) -> web.Response:
    return json_response(ToolCatalog(request.app[SERVICES].tools).client_options())


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/v1/tools", list_tools)
    app.router.add_get(f"{prefix}/v1/mcp-auth/client-options", client_options)
