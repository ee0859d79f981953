"""The web_search executor of the local engine: a request's `web_search` tool, run
against the search endpoint the operator configured (`web_search.url`).

The endpoint's contract (docs/engine.md says it for operators):

    POST <web_search.url>            Authorization: Bearer <web_search.api_key>, if set
    {"query": "...", "max_results": 5, "search_context_size": "medium",
     "allowed_domains": ["..."]}     (the last only when the tool's filters name some)
    → 200 {"results": [{"url": "https://...", "title": "...", "content": "..."}]}

`title` and `content` may be missing; results past `max_results` are ignored. Any other
answer (no connection, no answer within `web_search.timeout`, a non-2xx status, a body
of another shape) is an error result: the model reads `Error: …` and the
`web_search_call` item ends `failed`; the turn goes on.

The model sees the tool as a function `web_search(query)`; its call is a
`web_search_call` item (the search lifecycle, `items.py`: `output_item.added` with `action: {type:
search}`, then `response.web_search_call.in_progress` and `….searching` when its
arguments are complete, `….completed` and `output_item.done` with `action.query`, and
`action.sources` when the request's `include` asks for `web_search_call.action.sources`).
The model gets the results numbered for the whole response (`citations.py`), so the
markers it cites become `url_citation` annotations on its answer.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.config import WebSearchConfig
from gateway.engine.citations import Citations
from gateway.engine.emitter import Emitter
from gateway.engine.executor import EngineTool, Setup, ToolCall, ToolResult
from gateway.engine.items import CallItem, ItemKind, Lifecycle
from gateway.engine.json_service import JsonService, ServiceRefused, ServiceUnavailable
from gateway.upstream.breaker import DEFAULT_CIRCUIT, CircuitBreaker
from gateway.engine.mcp import model_name
from gateway.engine.plan import Plan
from gateway.engine.translate import unsupported
from gateway.schema.responses_tools import WEB_SEARCH_TYPES

SOURCES_INCLUDE = "web_search_call.action.sources"
MAX_CONTENT_CHARS = 4_000  # per result, for the model
TOOL_TYPE = "web_search_tool"  # the engine's own definition in Plan.tools
ITEM = ItemKind("web_search_call", "ws", Lifecycle.SEARCH)  # how its calls are shown
FUNCTION = {"description": "Search the web. Returns numbered results; cite a result by its marker, e.g. [1].",
            "parameters": {"type": "object", "properties": {"query": {
                "type": "string", "description": "What to search the web for"}}, "required": ["query"]}}


class WebSearchExecutor(EngineTool):
    """`config` None: the gateway has no search endpoint, and requests with a web_search
    tool are refused."""

    item_kinds = (ITEM,)

    def __init__(self, config: WebSearchConfig | None, circuit: tuple[int, float] = DEFAULT_CIRCUIT):
        self._service = None if config is None else JsonService.at(config.url, config.api_key, config.timeout,
                                                                   "The web search service", circuit)
        self._max_results = 0 if config is None else config.max_results

    def breakers(self) -> list[CircuitBreaker]:
        """The search provider's circuit (`gateway_upstream_circuit_state`)."""
        return self._service.breakers() if self._service is not None else []

    async def start(self) -> None:
        if self._service is not None:
            await self._service.start()

    async def close(self) -> None:
        if self._service is not None:
            await self._service.close()

    def check(self, body: dict[str, Any]) -> None:
        searches = web_search_tools(body.get("tools") or [])
        if searches and self._service is None:
            raise unsupported("web_search needs a search endpoint: the gateway's configuration has no "
                              "web_search section", param="tools")
        if forces_web_search(body) and not searches:
            raise unsupported("tool_choice names web_search, which is not among the request's tools",
                              param="tool_choice")

    def offer(self, setup: Setup) -> None:
        for tool in web_search_tools(setup.tools)[:1]:  # one search tool is all the model needs
            offer_web_search(tool, setup.body, setup.plan, setup.emitter)

    def can_execute(self, tool: dict[str, Any]) -> bool:
        return tool.get("type") == TOOL_TYPE

    async def execute(self, call: ToolCall) -> ToolResult:
        action: dict[str, Any] = {"type": "search", "query": None}
        try:
            query = orjson.loads(call.arguments or "{}").get("query")
        except (orjson.JSONDecodeError, AttributeError):
            query = None
        if not isinstance(query, str) or not query.strip():
            return _failed(action, "web_search needs a non-empty `query` string argument")
        action["query"] = query
        request = call.tool["request"]
        body: dict[str, Any] = {"query": query, "max_results": self._max_results,
                                "search_context_size": request.get("search_context_size") or "medium"}
        domains = (request.get("filters") or {}).get("allowed_domains")
        if isinstance(domains, list) and domains:
            body["allowed_domains"] = [str(domain) for domain in domains]
        assert self._service is not None  # check() refused the request otherwise
        try:
            results = _results(await self._service.post(body))[:self._max_results]
        except (ServiceUnavailable, ServiceRefused, ValueError) as exc:
            return _failed(action, f"The web search failed: {exc}")
        citations: Citations = call.tool["citations"]
        numbered = [(citations.add(result["url"], result["title"]), result) for result in results]
        if call.tool["include_sources"]:
            action["sources"] = [{"type": "url", "url": result["url"]} for result in results]
        return ToolResult(_for_the_model(query, numbered), fields={"action": action})


def _failed(action: dict[str, Any], message: str) -> ToolResult:
    return ToolResult(message, is_error=True, fields={"action": action})


def _results(answer: Any) -> list[dict[str, str]]:
    """The endpoint's results, checked; ValueError for an answer of another shape."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ValueError("the web search service answered without a `results` list")
    checked = []
    for result in results:
        if not isinstance(result, dict) or not isinstance(result.get("url"), str) or not result["url"]:
            raise ValueError("the web search service answered a result without a `url`")
        checked.append({"url": result["url"], "title": str(result.get("title") or ""),
                        "content": str(result.get("content") or "")[:MAX_CONTENT_CHARS]})
    return checked


def _for_the_model(query: str, numbered: list[tuple[int, dict[str, str]]]) -> str:
    if not numbered:
        return f"The web search for {query!r} found nothing."
    lines = [f"Web search results for {query!r}:"]
    for number, result in numbered:
        lines += [f"[{number}] {result['title'] or result['url']}", f"URL: {result['url']}", result["content"], ""]
    lines.append("Cite a result by its marker, e.g. [1], right after the statement it supports.")
    return "\n".join(lines)


def web_search_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool for tool in tools if tool.get("type") in WEB_SEARCH_TYPES]


def forces_web_search(body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    return isinstance(choice, dict) and choice.get("type") in WEB_SEARCH_TYPES


def offer_web_search(tool: dict[str, Any], body: dict[str, Any], plan: Plan, emitter: Emitter) -> None:
    """The request's web_search tool as a function the model may call (forced by a
    `tool_choice` of its type, allowed by an `allowed_tools` entry of it), its calls shown as `web_search_call` items, its sources
    numbered for the answer's annotations."""
    name = model_name("web", "web_search", set(plan.tools))
    choice, include = body.get("tool_choice"), body.get("include")
    if isinstance(choice, dict) and choice.get("type") in WEB_SEARCH_TYPES:
        plan.tool_choice = {"type": "function", "function": {"name": name}}
    if plan.allowed is not None and isinstance(choice, dict) and any(  # `allowed_tools` naming the search
            isinstance(entry, dict) and entry.get("type") in WEB_SEARCH_TYPES for entry in choice.get("tools") or ()):
        plan.allowed = plan.allowed | {name}
    citations = emitter.sources = emitter.sources or Citations()
    plan.tools[name] = {"type": TOOL_TYPE, "name": name, "request": tool, "citations": citations,
                        "include_sources": isinstance(include, list) and SOURCES_INCLUDE in include}
    plan.chat.setdefault("tools", []).append({"type": "function", "function": {"name": name, **FUNCTION}})
    emitter.call_items[name] = CallItem(ITEM, {"action": {"type": "search"}})
