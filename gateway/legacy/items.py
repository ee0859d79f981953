"""A Responses output item as LCORE's legacy summaries (sans-I/O): `tool_calls` /
`tool_results` entries (`ToolCallSummary`, `ToolResultSummary`, lcore.md 2.2), and the
`rag_chunks` / `referenced_documents` of file_search results. Shared by the JSON
`QueryResponse` and the stream's `tool_call` / `tool_result` events."""

from __future__ import annotations

from typing import Any, TypedDict

import orjson

from gateway.schema.json_types import JsonObject


class ToolCallSummary(TypedDict):
    """LCORE's `ToolCallSummary`."""
    id: str
    name: str
    args: dict[str, Any]
    type: str


class ToolResultSummary(TypedDict):
    """LCORE's `ToolResultSummary`."""
    id: str
    status: str
    content: str
    type: str
    round: int


class RagChunk(TypedDict):
    """LCORE's (deprecated) `RAGChunk`."""
    content: str
    source: Any
    score: Any
    attributes: Any


class ReferencedDocument(TypedDict):
    """LCORE's `ReferencedDocument`."""
    doc_url: Any
    doc_title: Any
    source: Any
    document_id: Any


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return dict(arguments)
    if isinstance(arguments, str) and arguments:
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return {"arguments": arguments}
        return value if isinstance(value, dict) else {"arguments": value}
    return {}


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def tool_call(item: dict[str, Any]) -> ToolCallSummary | None:
    """The `ToolCallSummary` of a tool item (None for a message or reasoning)."""
    kind = item.get("type")
    ident = item.get("id") or item.get("call_id") or ""
    if kind == "function_call":
        return {"id": item.get("call_id") or ident, "name": item.get("name") or "",
                "args": _args(item.get("arguments")), "type": kind}
    if kind == "file_search_call":
        return {"id": ident, "name": "file_search", "args": {"queries": list(item.get("queries") or [])},
                "type": kind}
    if kind == "web_search_call":
        action = item.get("action")
        return {"id": ident, "name": "web_search", "args": dict(action) if isinstance(action, dict) else {},
                "type": kind}
    if kind in ("mcp_call", "mcp_approval_request"):
        return {"id": ident, "name": item.get("name") or "",
                "args": {**_args(item.get("arguments")), "server_label": item.get("server_label")}, "type": kind}
    if kind == "mcp_list_tools":
        return {"id": ident, "name": "mcp_list_tools", "args": {"server_label": item.get("server_label")},
                "type": kind}
    return None


def tool_result(item: dict[str, Any], round_: int) -> ToolResultSummary | None:
    """The `ToolResultSummary` of a finished tool item (None where the gateway has no
    result to show: a client's function call, an approval request)."""
    kind = item.get("type")
    ident = item.get("id") or ""
    if kind == "file_search_call":
        return {"id": ident, "status": item.get("status") or "completed",
                "content": _json({"results": item.get("results") or []}), "type": kind, "round": round_}
    if kind == "web_search_call":
        return {"id": ident, "status": item.get("status") or "completed", "content": "", "type": kind,
                "round": round_}
    if kind == "mcp_call":
        error = item.get("error")
        return {"id": ident, "status": "failure" if error else "success",
                "content": str(error if error else item.get("output") or ""), "type": kind, "round": round_}
    if kind == "mcp_list_tools":
        tools = [{"name": tool.get("name"), "description": tool.get("description"),
                  "input_schema": tool.get("input_schema")}
                 for tool in item.get("tools") or [] if isinstance(tool, dict)]
        return {"id": ident, "status": "success", "content": _json({"server_label": item.get("server_label"),
                                                                    "tools": tools}),
                "type": kind, "round": round_}
    return None


def rag_chunks(item: dict[str, Any]) -> list[RagChunk]:
    """A file_search item's results as LCORE's (deprecated) `rag_chunks`."""
    chunks: list[RagChunk] = []
    for result in item.get("results") or []:
        if isinstance(result, dict):
            attributes = result.get("attributes") or {}
            chunks.append({"content": result.get("text") or "",
                           "source": attributes.get("filename") or result.get("filename"),
                           "score": result.get("score"), "attributes": attributes})
    return chunks


def referenced_documents(items: list[dict[str, Any]]) -> list[ReferencedDocument]:
    """The documents file_search results came from, once each, in order: the URL and
    title from the chunk's attributes where the store keeps them."""
    documents: list[ReferencedDocument] = []
    seen: set[tuple[Any, Any]] = set()
    for item in items:
        if item.get("type") != "file_search_call":
            continue
        for result in item.get("results") or []:
            if not isinstance(result, dict):
                continue
            attributes = result.get("attributes") or {}
            url = attributes.get("doc_url") or attributes.get("docs_url") or attributes.get("url")
            title = attributes.get("title") or attributes.get("filename") or result.get("filename")
            key = (url, title)
            if key in seen:
                continue
            seen.add(key)
            documents.append({"doc_url": url, "doc_title": title, "source": attributes.get("source"),
                              "document_id": attributes.get("document_id") or result.get("file_id")})
    return documents


def summaries(items: list[JsonObject]) -> tuple[list[ToolCallSummary], list[ToolResultSummary], list[RagChunk]]:
    """A turn's `tool_calls`, `tool_results` (numbered by round) and `rag_chunks`, from
    its output items in order (a `QueryResponse`, a conversation's `chat_history`)."""
    calls: list[ToolCallSummary] = []
    results: list[ToolResultSummary] = []
    chunks: list[RagChunk] = []
    round_ = 0
    for item in items:
        call = tool_call(item)
        if call is None:
            continue
        calls.append(call)
        if item.get("type") in ("function_call", "mcp_approval_request"):
            continue
        round_ += 1
        result = tool_result(item, round_)
        if result is not None:
            results.append(result)
        if item.get("type") == "file_search_call":
            chunks += rag_chunks(item)
    return calls, results, chunks
