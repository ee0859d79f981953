"""The finished, settled Responses object of a `/v1/query` turn as LCORE's
`QueryResponse` (lcore.md 2.2 and 13; sans-I/O)."""

from __future__ import annotations

from typing import Any

from gateway.legacy.items import rag_chunks, referenced_documents, tool_call, tool_result
from gateway.legacy.stream import answer_text


def query_response(conversation_id: str | None, response: dict[str, Any]) -> dict[str, Any]:
    """`conversation_id` is the bare 48 hex LCORE returns."""
    items = [item for item in response.get("output") or [] if isinstance(item, dict)]
    calls, results, chunks = [], [], []
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
    usage = response.get("usage") or {}
    return {"conversation_id": conversation_id, "response": answer_text(response), "rag_chunks": chunks,
            "referenced_documents": referenced_documents(items), "truncated": False,
            "input_tokens": int(usage.get("input_tokens") or 0), "output_tokens": int(usage.get("output_tokens") or 0),
            "available_quotas": response.get("available_quotas") or {}, "tool_calls": calls, "tool_results": results}
