"""A loopback vector store search server (OpenAI's `POST /v1/vector_stores/{id}/search`)
for end-to-end tests of the engine's file_search.

Run it as ``python -m tests.support.vector_store --port N``; it prints one line,
``vector store server listening on http://127.0.0.1:N``, once it accepts connections.

Stores (fixed documents, one chunk each):
  * ``vs_manuals``: ``file-m1`` manual.txt (the Falcon launch code), ``file-m2``
    ``handbuch.txt`` (German, attribute ``lang: de``);
  * ``vs_faq``: ``file-f1`` faq.md (when Falcon ships), ``file-f2`` mascot.md;
  * ``vs_slow``, ``vs_slow_*``: answer HTTP 404 after 10 s (timeouts); a search the
    client gives up on first is recorded with ``"cancelled": true``;
  * ``vs_broken``: answers HTTP 500;
  * any other id: HTTP 404, as OpenAI and Llama Stack answer for a store they lack.

Scores are 0.5 per distinct query word found in the chunk (so they exceed 1, as
faiss's do). ``filters`` (OpenAI's comparison filters ``eq``/``ne``/``gt``/``gte``/
``lt``/``lte`` and compound ``and``/``or``) and ``max_num_results`` are applied;
``ranking_options`` is ignored, so the gateway's own threshold is what a test sees.

``GET /_vs/requests`` lists the search requests received (``{"store", "body",
"headers"}``); ``DELETE /_vs/requests`` clears them.
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

RECORD_PATH = "/_vs/requests"
STORES: dict[str, list[dict[str, Any]]] = {
    "vs_manuals": [
        {"file_id": "file-m1", "filename": "manual.txt", "attributes": {"lang": "en", "year": 2025},
         "text": "The secret launch code for project Falcon is 7-alpha-9."},
        {"file_id": "file-m2", "filename": "handbuch.txt", "attributes": {"lang": "de", "year": 2024},
         "text": "Der Startcode für Falcon ist 7-alpha-9."},
    ],
    "vs_faq": [
        {"file_id": "file-f1", "filename": "faq.md", "attributes": {"lang": "en", "year": 2025},
         "text": "Falcon ships in March; the launch code stays secret."},
        {"file_id": "file-f2", "filename": "mascot.md", "attributes": {"lang": "en", "year": 2023},
         "text": "The team mascot is a red panda named Ember."},
    ],
}
_WORD = re.compile(r"[a-z0-9]+")
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "gt": lambda a, b: a > b,
            "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b}


def _matches(attributes: dict[str, Any], flt: dict[str, Any] | None) -> bool:
    if not flt:
        return True
    kind = flt.get("type")
    if kind in ("and", "or"):
        results = [_matches(attributes, inner) for inner in flt.get("filters") or []]
        return all(results) if kind == "and" else any(results)
    value = attributes.get(flt.get("key"))
    return value is not None and _COMPARE[kind](value, flt.get("value"))


def search(store: str, body: dict[str, Any]) -> dict[str, Any]:
    query = str(body.get("query") or "")
    words = set(_WORD.findall(query.lower()))
    data = []
    for doc in STORES[store]:
        if not _matches(doc["attributes"], body.get("filters")):
            continue
        score = 0.5 * len(words & set(_WORD.findall(doc["text"].lower())))
        if score > 0:
            data.append({"file_id": doc["file_id"], "filename": doc["filename"], "score": score,
                         "attributes": doc["attributes"], "content": [{"type": "text", "text": doc["text"]}]})
    data.sort(key=lambda entry: entry["score"], reverse=True)
    data = data[:int(body.get("max_num_results") or 10)]
    return {"object": "vector_store.search_results.page", "search_query": [query], "data": data,
            "has_more": False, "next_page": None}


def build_app() -> web.Application:
    records: list[dict[str, Any]] = []

    async def handle_search(request: web.Request) -> web.Response:
        store = request.match_info["store"]
        body = await request.json()
        record = {"store": store, "body": body, "headers": {k.lower(): v for k, v in request.headers.items()}}
        records.append(record)
        if store.startswith("vs_slow"):
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:  # the client closed the connection
                record["cancelled"] = True
                raise
        if store == "vs_broken":
            return web.json_response({"error": {"message": "index corrupted"}}, status=500)
        if store not in STORES:
            return web.json_response({"detail": f"Vector store '{store}' not found."}, status=404)
        return web.json_response(search(store, body))

    async def list_records(request: web.Request) -> web.Response:
        return web.json_response(records)

    async def clear_records(request: web.Request) -> web.Response:
        count = len(records)
        records.clear()
        return web.json_response({"cleared": count})

    app = web.Application()
    app.router.add_post("/v1/vector_stores/{store}/search", handle_search)
    app.router.add_get(RECORD_PATH, list_records)
    app.router.add_delete(RECORD_PATH, clear_records)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    print(f"vector store server listening on http://127.0.0.1:{args.port}", flush=True)
    # handler_cancellation: a client that goes away cancels its search (recorded).
    web.run_app(build_app(), host="127.0.0.1", port=args.port, print=None, handler_cancellation=True)


# Helpers for tests (run in the test process, not in the server).


def start_vector_store(log_dir: Path):
    """Spawn the server and wait until it answers; `.url` is its base URL."""
    from tests.support.processes import free_port, python_module, spawn, wait_http

    port = free_port()
    proc = spawn("vector-store", python_module("tests.support.vector_store", "--port", str(port)), log_dir)
    proc.url = f"http://127.0.0.1:{port}"
    wait_http(proc, proc.url + RECORD_PATH, ok=lambda status: status == 200)
    return proc


def recorded_searches(server: Any) -> list[dict[str, Any]]:
    with urllib.request.urlopen(server.url + RECORD_PATH, timeout=5) as reply:
        return json.loads(reply.read())


def clear_searches(server: Any) -> None:
    with urllib.request.urlopen(urllib.request.Request(server.url + RECORD_PATH, method="DELETE"), timeout=5):
        pass


if __name__ == "__main__":
    main()
