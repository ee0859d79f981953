"""`/openapi.json` built once, off the event loop, however many requests ask for it first;
the landing page with the operator's name and root path escaped. (The document's content:
test_openapi.py and tests/e2e/test_openapi.py.)"""

from __future__ import annotations

import asyncio
import json
import threading
from types import SimpleNamespace

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.http import root
from gateway.http.services import SERVICES


async def test_the_document_is_built_once_off_the_loop(monkeypatch):
    built: list[tuple] = []

    def document(title: str, version: str, root_path: str) -> dict:
        built.append((title, root_path, threading.current_thread() is threading.main_thread()))
        return {"openapi": "3.1.0", "info": {"title": title}}

    monkeypatch.setattr(root, "openapi_document", document)
    cache = root.OpenApiCache()
    bodies = await asyncio.gather(*(cache.body("gw", "/api") for _ in range(10)))
    assert built == [("gw", "/api", False)]
    assert set(bodies) == {b'{"openapi":"3.1.0","info":{"title":"gw"}}'}


async def test_a_cancelled_first_request_does_not_cancel_the_build(monkeypatch):
    release = threading.Event()

    def slow(title: str, version: str, root_path: str) -> dict:
        release.wait(5)
        return {"title": title}

    monkeypatch.setattr(root, "openapi_document", slow)
    cache = root.OpenApiCache()
    first = asyncio.ensure_future(cache.body("gw", ""))
    await asyncio.sleep(0.01)
    first.cancel()
    release.set()
    assert json.loads(await cache.body("gw", "")) == {"title": "gw"}


async def test_the_landing_page_escapes_what_the_operator_wrote():
    app = web.Application()
    config = SimpleNamespace(name='<script>alert("x")</script>', service=SimpleNamespace(root_path='/a"b'))
    app[SERVICES] = SimpleNamespace(config=config)   # type: ignore[misc]
    page = (await root.landing_page(make_mocked_request("GET", "/", app=app))).text
    assert page is not None and "<script>" not in page
    assert "<title>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</title>" in page
    assert 'href="/a&quot;b/v1/models"' in page
