"""`GET /openapi.json` (public, as in LCORE) and `GET /`, a small landing page."""

from __future__ import annotations

import asyncio
import html

import orjson
from aiohttp import web

from gateway.http.catalog import gateway_version
from gateway.http.openapi import openapi_document
from gateway.http.services import SERVICES

class OpenApiCache:
    """The document, built once: generating the schemas takes about a second of CPU, so it
    happens off the event loop, on first use."""

    def __init__(self) -> None:
        self._body: asyncio.Future[bytes] | None = None

    async def body(self, title: str, root_path: str) -> bytes:
        if self._body is None:
            loop = asyncio.get_running_loop()
            self._body = loop.run_in_executor(
                None, lambda: orjson.dumps(openapi_document(title, gateway_version(), root_path)))
        return await asyncio.shield(self._body)


_DOCUMENT: web.AppKey[OpenApiCache] = web.AppKey("openapi_document", OpenApiCache)

async def openapi(request: web.Request) -> web.Response:
    config = request.app[SERVICES].config
    body = await request.app[_DOCUMENT].body(config.name, config.service.root_path)
    return web.Response(body=body, content_type="application/json")


async def landing_page(request: web.Request) -> web.Response:
    config = request.app[SERVICES].config
    name = html.escape(config.name)
    base = html.escape(config.service.root_path)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{name}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;line-height:1.5}}
code{{background:#f2f2f2;padding:0 .2em}}</style></head>
<body><h1>{name}</h1>
<p>An OpenAI-compatible gateway in front of Llama Stack, version {html.escape(gateway_version())}.</p>
<ul>
<li><code>POST {base}/v1/responses</code>: the Responses API, with conversations and quotas</li>
<li><a href="{base}/v1/models"><code>GET {base}/v1/models</code></a>: the models you can use</li>
<li><a href="{base}/openapi.json"><code>GET {base}/openapi.json</code></a>: the API, described</li>
<li><a href="{base}/readiness"><code>GET {base}/readiness</code></a>: is it ready</li>
</ul></body></html>
"""
    return web.Response(text=page, content_type="text/html")


def add_routes(app: web.Application, prefix: str) -> None:
    if _DOCUMENT not in app:
        app[_DOCUMENT] = OpenApiCache()
    app.router.add_get(f"{prefix}/openapi.json", openapi)
    app.router.add_get(f"{prefix}/" if prefix else "/", landing_page)


PUBLIC_HANDLERS = frozenset({openapi})
