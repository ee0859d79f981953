"""The finished, settled Responses object of a `/v1/query` turn as LCORE's
`QueryResponse` (lcore.md 2.2 and 13; sans-I/O)."""

from __future__ import annotations


from gateway.legacy.items import referenced_documents, summaries
from gateway.legacy.stream import answer_text
from gateway.schema.json_types import JsonObject


def query_response(conversation_id: str | None, response: JsonObject) -> JsonObject:
    """`conversation_id` is the bare 48 hex LCORE returns."""
    items = [item for item in response.get("output") or [] if isinstance(item, dict)]
    calls, results, chunks = summaries(items)
    usage = response.get("usage") or {}
    return {"conversation_id": conversation_id, "response": answer_text(response), "rag_chunks": chunks,
            "referenced_documents": referenced_documents(items), "truncated": False,
            "input_tokens": int(usage.get("input_tokens") or 0), "output_tokens": int(usage.get("output_tokens") or 0),
            "available_quotas": response.get("available_quotas") or {}, "tool_calls": calls, "tool_results": results}
