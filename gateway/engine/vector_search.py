"""The file_search executor of the local engine: searches vector stores through the
OpenAI-compatible `POST /v1/vector_stores/{id}/search`.

Where: a store's `byok_rag` entry may name its own `search_url` (with its own
`search_api_key`, if any); otherwise (and for a store a client may name without one,
`client_tools.allow_unconfigured_vector_stores`) the upstream, with the upstream's API key. Which stores: only those in the request's
file_search tool, which `turns/tools.py` already restricted to the ones the operator allows.

The stores of a call are searched concurrently, each within its `search_timeout` (30 s
for a store without an entry). A store that fails (unreachable, an HTTP error, no
answer in time, an answer that is not a results page) is left out and named in what
the model reads; when every store fails the call is an error result (its item
`failed`). Nothing a store answers reaches the client but the results; nothing about
where a store is (its URL) reaches the model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence
from urllib.parse import quote

from gateway.config import ByokRagConfig, LlamaStackConfig
from gateway.engine import file_search
from gateway.engine.executor import EngineTool, Setup, ToolCall, ToolResult
from gateway.schema.errors import ApiError
from gateway.upstream.breaker import DEFAULT_CIRCUIT, CircuitBreaker, failures, open_circuit
from gateway.upstream.client import TIMED_OUT, UpstreamClient

log = logging.getLogger("gateway.engine.file_search")
DEFAULT_TIMEOUT = 30.0


class SearchFailed(Exception):
    """One store could not be searched; the message is what the model reads."""


class FileSearchExecutor(EngineTool):
    item_kinds = (file_search.ITEM,)

    def __init__(self, upstream: UpstreamClient, stores: Sequence[ByokRagConfig] = (),
                 circuit: tuple[int, float] = DEFAULT_CIRCUIT):
        self._upstream = upstream
        self._stores: dict[str, ByokRagConfig] = {}
        for store in stores:  # a store in two entries: the first one says how to search it
            self._stores.setdefault(store.vector_db_id, store)
        # One client per search_url and key, the connections kept alive like the upstream's.
        self._clients = {(store.search_url, store.search_api_key): UpstreamClient(LlamaStackConfig(
            url=store.search_url, api_key=store.search_api_key, timeout=store.search_timeout, max_retries=0,
            display_name="vector store search", circuit_breaker_failures=circuit[0],
            circuit_breaker_cooldown_seconds=circuit[1])) for store in stores if store.search_url}

    def breakers(self) -> list[CircuitBreaker]:
        """Each search provider's circuit (the upstream's own is reported with it)."""
        return [client.breaker for client in self._clients.values() if client.breaker is not None]

    async def start(self) -> None:
        for client in self._clients.values():
            await client.start()

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()

    def offer(self, setup: Setup) -> None:
        file_search.offer(setup.tools, setup.body.get("include"), setup.plan, setup.emitter, setup.history)

    def can_execute(self, tool: dict[str, Any]) -> bool:
        return tool.get("type") == "file_search"

    async def execute(self, call: ToolCall) -> ToolResult:
        tool = call.tool
        try:
            query = file_search.query_of(call.arguments)
        except ValueError as exc:
            return ToolResult(f"Invalid arguments: {exc}", is_error=True, fields={"queries": []})
        body = file_search.search_body(query, tool)
        store_ids = list(dict.fromkeys(str(store_id) for store_id in tool.get("vector_store_ids") or ()))
        outcomes = await asyncio.gather(*(self._search(store_id, body) for store_id in store_ids),
                                        return_exceptions=True)
        found, failures = [], []
        for outcome in outcomes:
            if isinstance(outcome, SearchFailed):
                failures.append(str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                found.append(outcome)
        if store_ids and not found:
            return ToolResult("file_search failed: " + "; ".join(failures), is_error=True,
                              fields={"queries": [query]})
        hits = file_search.merge(found, file_search.threshold_of(tool),
                                 int(tool.get("max_num_results") or file_search.DEFAULT_MAX_RESULTS))
        fields: dict[str, Any] = {"queries": [query]}
        if tool.get("include_results"):
            fields["results"] = file_search.results(hits)
        return ToolResult(file_search.model_text(query, hits, failures), fields=fields,
                          citations=file_search.citation_files(hits))

    async def _search(self, store_id: str, body: dict[str, Any]) -> list[file_search.Hit]:
        store = self._stores.get(store_id)
        client = self._clients[(store.search_url, store.search_api_key)] if store is not None and store.search_url \
            else self._upstream
        timeout = store.search_timeout if store is not None else DEFAULT_TIMEOUT
        multiplier = store.score_multiplier if store is not None else 1.0
        path = file_search.SEARCH_PATH.format(quote(store_id, safe=""))
        failed_before = failures(client.breaker)
        try:
            async with asyncio.timeout(timeout):
                reply = await client.request("POST", path, json=body, timeout=timeout)
        except TimeoutError:
            raise SearchFailed(f"vector store {store_id} did not answer within {timeout:g} s") from None
        except ApiError as exc:  # the client logged what the socket said
            refused = open_circuit(client.breaker, failed_before)
            if refused:
                raise SearchFailed(f"vector store {store_id} {refused}") from None
            if exc.cause == TIMED_OUT:  # its own read timeout came first
                raise SearchFailed(f"vector store {store_id} did not answer within {timeout:g} s") from None
            raise SearchFailed(f"vector store {store_id} is unreachable") from None
        if not reply.ok:
            log.warning("vector store %s search: HTTP %d %s", store_id, reply.status, reply.body[:200])
            raise SearchFailed(f"vector store {store_id} answered HTTP {reply.status}")
        try:
            return file_search.hits_of(reply.json(), multiplier)
        except ValueError as exc:  # orjson's decode error is a ValueError too
            log.warning("vector store %s search: %s", store_id, exc)
            raise SearchFailed(f"vector store {store_id} gave no usable answer") from None
