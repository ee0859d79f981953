"""The file_search executor's requests and failures, against a real aiohttp server on
loopback standing in for the upstream and a store's own search_url."""

from __future__ import annotations

import json

from aiohttp import web

from gateway.config import ByokRagConfig, LlamaStackConfig
from gateway.engine.executor import ToolCall
from gateway.engine.vector_search import FileSearchExecutor
from gateway.upstream.client import UpstreamClient

ARGS = json.dumps({"query": "falcon code"})


def page(file_id: str, score: float) -> dict:
    return {"object": "vector_store.search_results.page", "data": [
        {"file_id": file_id, "filename": f"{file_id}.txt", "score": score, "content": [{"type": "text", "text": "t"}]}]}


async def serve(aiohttp_server, answers: dict, seen: list):
    async def search(request: web.Request) -> web.StreamResponse:
        store = request.match_info["store"]
        seen.append((store, request.headers.get("Authorization"), await request.json()))
        answer = answers[store]
        if isinstance(answer, int):
            return web.Response(status=answer, text="nope")
        if isinstance(answer, str):
            return web.Response(text=answer)
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/v1/vector_stores/{store}/search", search)
    return await aiohttp_server(app)


async def executor_for(upstream_url: str, stores: list[ByokRagConfig]) -> FileSearchExecutor:
    upstream = UpstreamClient(LlamaStackConfig(url=upstream_url, api_key="upstream-key", max_retries=0))
    await upstream.start()
    executor = FileSearchExecutor(upstream, stores)
    await executor.start()
    return executor


def call(*stores: str, **options) -> ToolCall:
    return ToolCall("call_1", "file_search", ARGS, {"type": "file_search", "vector_store_ids": list(stores),
                                                     "include_results": True, **options})


async def test_stores_are_searched_where_configured_and_merged(aiohttp_server):
    seen_upstream: list = []
    seen_own: list = []
    upstream = await serve(aiohttp_server, {"vs_up": page("file-u", 1.0), "vs_any": page("file-a", 0.5)},
                           seen_upstream)
    own = await serve(aiohttp_server, {"vs_own": page("file-o", 0.4)}, seen_own)
    executor = await executor_for(str(upstream.make_url("/")), [
        ByokRagConfig(rag_id="up", vector_db_id="vs_up"),
        ByokRagConfig(rag_id="own", vector_db_id="vs_own", search_url=str(own.make_url("")).rstrip("/"),
                      search_api_key="own-key", score_multiplier=5.0),
        ByokRagConfig(rag_id="up-again", vector_db_id="vs_up", score_multiplier=100.0)])  # the first entry rules
    result = await executor.execute(call("vs_up", "vs_own", "vs_any", max_num_results=2))
    assert not result.is_error
    assert [(r["file_id"], r["score"]) for r in result.fields["results"]] == [("file-o", 2.0), ("file-u", 1.0)]
    assert result.citations == {"file-o": "file-o.txt", "file-u": "file-u.txt"}
    # The upstream's stores carry its API key; a store's own search_url gets its own key.
    assert sorted((store, auth) for store, auth, _ in seen_upstream) == [("vs_any", "Bearer upstream-key"),
                                                                         ("vs_up", "Bearer upstream-key")]
    assert [(store, auth) for store, auth, _ in seen_own] == [("vs_own", "Bearer own-key")]
    assert seen_own[0][2] == {"query": "falcon code", "max_num_results": 2, "rewrite_query": False}
    await executor.close()


async def test_failures_are_named_and_all_failing_is_an_error(aiohttp_server):
    upstream = await serve(aiohttp_server, {"vs_404": 404, "vs_text": "not json", "vs_shape": {"data": "x"},
                                            "vs_ok": page("file-k", 1.0)}, [])
    executor = await executor_for(str(upstream.make_url("/")), [
        ByokRagConfig(rag_id="gone", vector_db_id="vs_gone", search_url="http://127.0.0.1:9")])
    partial = await executor.execute(call("vs_404", "vs_ok", "vs_gone"))
    assert not partial.is_error and [r["file_id"] for r in partial.fields["results"]] == ["file-k"]
    assert "Not searched: vector store vs_404 answered HTTP 404" in partial.output
    assert "Not searched: vector store vs_gone is unreachable" in partial.output
    failed = await executor.execute(call("vs_text", "vs_shape"))
    assert failed.is_error and failed.fields == {"queries": ["falcon code"]}
    assert failed.output == ("file_search failed: vector store vs_text gave no usable answer; "
                             "vector store vs_shape gave no usable answer")
    bad = await executor.execute(ToolCall("call_2", "file_search", '{"q": 1}', call("vs_ok").tool))
    assert bad.is_error and bad.output.startswith("Invalid arguments:")
    await executor.close()
