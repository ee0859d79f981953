"""A failed MCP call's `error` in the `openai` types' shape (sans-I/O).

A failed MCP call's `error` is a string where the `openai` types have an object
(McpToolCallError), wherever an `mcp_call` item appears: a response's `output`,
`output_item.added`/`.done`, and `input_items` (which replay earlier turns' output).
Llama Stack renders an MCP result with `isError` (the tool raised) as
`"Error (code 1): None"` (the tool's own message reaches only the model), and an
exception from its MCP client (a JSON-RPC error answer) as the exception's text:
`"Error (code …): …"` becomes `{"type": "mcp_tool_execution_error", "content":
[{"type": "text", "text": <string>}]}` (MCP's CallToolResult content), any other
string `{"type": "mcp_protocol_error", "code": 0, "message": <string>}` (Llama Stack
drops the JSON-RPC code; 0 is no JSON-RPC code, so it cannot pass for a real one).
The text is kept as sent. Any other value but null and a valid error object is read
as its `message` (or its JSON) and mapped the same way.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# How Llama Stack 0.7.3 renders an MCP result with isError (tool_executor.py).
_TOOL_RESULT_ERROR = re.compile(r"Error \(code [^)]*\): ")
UNREPORTED_PROTOCOL_ERROR_CODE = 0


def mcp_call_error(error: Any) -> Any:
    """An `mcp_call` item's `error` as the `openai` McpToolCallError (mapping: module docstring)."""
    if error is None or _is_mcp_call_error(error):
        return error
    text = _error_text(error)
    if _TOOL_RESULT_ERROR.match(text):
        return {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}
    return {"type": "mcp_protocol_error", "code": UNREPORTED_PROTOCOL_ERROR_CODE, "message": text}


def _is_mcp_call_error(error: Any) -> bool:
    if not isinstance(error, dict):
        return False
    kind = error.get("type")
    if kind == "mcp_tool_execution_error":
        return "content" in error
    if kind in ("mcp_protocol_error", "http_error"):
        code = error.get("code")
        return isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("message"), str)
    return False


def _error_text(error: Any) -> str:
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message: str = error["message"]
        return message
    return orjson.dumps(error).decode()
