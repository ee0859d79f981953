"""Input items in the form Llama Stack 0.7.3 accepts.

The gateway returns an MCP call's `error` as the `openai` object (`McpToolExecutionError`
and friends), and clients send outputs back as input; Llama Stack types that `error` as
a string and refuses the object with a 400. So before a turn goes to Llama Stack, such
errors become their text again.
"""

from __future__ import annotations

from typing import Any

import orjson


def for_llama_stack(items: list[Any]) -> list[Any]:
    """`items` with every object `mcp_call.error` as text (the list itself if none is)."""
    if not any(_object_error(item) for item in items):
        return items
    return [{**item, "error": error_text(item["error"])} if _object_error(item) else item for item in items]


def error_text(error: dict[str, Any]) -> str:
    """The text of an `openai` MCP error object: its message, or its content's text."""
    message = error.get("message")
    if isinstance(message, str):
        return message
    content = error.get("content")
    if isinstance(content, list):
        texts = [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return orjson.dumps(error).decode()


def _object_error(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "mcp_call" and isinstance(item.get("error"), dict)
