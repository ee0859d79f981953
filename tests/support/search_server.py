"""A loopback fake of the web search endpoint the engine's web_search tool calls (the
contract in gateway/engine/web_search.py and docs/engine.md).

Run it as ``python -m tests.support.search_server --port N``. ``POST /search`` with
``{"query", "max_results", ...}`` answers ``{"results": [...]}``: for a query it makes up
three results, ``https://example.com/<slug>/<n>`` titled ``Result <n> for <query>``
with the content ``About <query>: fact <n>.``. Words in the query change that:

* ``slow-search``: answers after 30 s (past any timeout a test configures);
* ``broken-search``: HTTP 500;
* ``malformed-search``: 200 with a body of another shape (no ``results`` list);
* ``empty-search``: no results.

Every request is recorded (``GET /_search/requests``: ``{"method", "path", "headers",
"body"}``, header names lower-cased; ``DELETE`` clears them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

from aiohttp import web

RECORD_PATH = "/_search/requests"
SEARCH_PATH = "/search"
RESULTS = 3


async def search(request: web.Request) -> web.Response:
    body = await request.json()
    query = str(body.get("query") or "")
    if "slow-search" in query:
        await asyncio.sleep(30)
    if "broken-search" in query:
        return web.json_response({"error": {"message": "search backend exploded"}}, status=500)
    if "malformed-search" in query:
        return web.json_response({"items": [query]})
    if "empty-search" in query:
        return web.json_response({"results": []})
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-")[:40] or "q"
    count = min(RESULTS, int(body.get("max_results") or RESULTS))
    return web.json_response({"results": [
        {"url": f"https://example.com/{slug}/{n}", "title": f"Result {n} for {query}",
         "content": f"About {query}: fact {n}."} for n in range(1, count + 1)]})


def create_app() -> web.Application:
    recorded: list[dict[str, Any]] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path != RECORD_PATH:
            recorded.append({"method": request.method, "path": request.path,
                             "headers": {k.lower(): v for k, v in request.headers.items()},
                             "body": (await request.read()).decode(errors="replace")})
        return await handler(request)

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(recorded)

    async def clear(request: web.Request) -> web.Response:
        count = len(recorded)
        recorded.clear()
        return web.json_response({"cleared": count})

    app = web.Application(middlewares=[record])
    app.router.add_post(SEARCH_PATH, search)
    app.router.add_get(RECORD_PATH, requests)
    app.router.add_delete(RECORD_PATH, clear)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(create_app(), host="127.0.0.1", port=args.port, print=None)


# Helpers for tests (run in the test process).


def running_search_server(tmp_path_factory: Any):
    """For a pytest fixture: yields the started server (``.url`` is its search
    endpoint) and stops it afterwards."""
    from tests.support.processes import free_port, python_module, spawn, wait_http

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = spawn("search-server", python_module("tests.support.search_server", "--port", str(port)),
                 Path(tmp_path_factory.mktemp("search")))
    wait_http(proc, base + RECORD_PATH, ok=lambda status: status == 200)
    proc.url = base + SEARCH_PATH
    proc.extra["base_url"] = base
    try:
        yield proc
    finally:
        proc.stop()


def recorded_searches(server: Any) -> list[dict[str, Any]]:
    with urllib.request.urlopen(server.extra["base_url"] + RECORD_PATH, timeout=5) as resp:
        return [{**r, "json": json.loads(r["body"])} for r in json.loads(resp.read()) if r["path"] == SEARCH_PATH]


if __name__ == "__main__":
    main()
