"""An `mcp_call`'s `error`: Llama Stack's string -> the openai McpToolCallError object
(`streaming/mcp_errors.py`), each result validated by the `openai` type."""

from __future__ import annotations

import pytest
from openai.types.responses.response_output_item import McpCall

from gateway.streaming.mcp_errors import mcp_call_error

MCP_CALL = {"id": "fc_1", "type": "mcp_call", "arguments": "{}", "name": "explode", "server_label": "s",
            "output": None}


def tool_error(text: str) -> dict:
    return {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": text}]}


def protocol_error(message: str) -> dict:
    return {"type": "mcp_protocol_error", "code": 0, "message": message}


@pytest.mark.parametrize("given, expected", [
    (None, None),
    # Llama Stack's rendering of an MCP result with isError (recorded: a tool that raised).
    ("Error (code 1): None", tool_error("Error (code 1): None")),
    ("Error (code None): quota exceeded", tool_error("Error (code None): quota exceeded")),
    # The text of an exception from its MCP client (recorded: a JSON-RPC error answer).
    ("reject refused: Use the reject tool", protocol_error("reject refused: Use the reject tool")),
    ("Session terminated", protocol_error("Session terminated")),
    ("Tool failed. Error (code 1): x", protocol_error("Tool failed. Error (code 1): x")),
    ("", protocol_error("")),
    # Already the openai shape: kept as it is.
    ({"type": "mcp_protocol_error", "code": -32602, "message": "bad"},
     {"type": "mcp_protocol_error", "code": -32602, "message": "bad"}),
    ({"type": "http_error", "code": 503, "message": "down"}, {"type": "http_error", "code": 503, "message": "down"}),
    (tool_error("boom"), tool_error("boom")),
    # Anything else: its message, or its JSON, mapped like a string.
    ({"type": "mcp_protocol_error", "message": "no code"}, protocol_error("no code")),
    ({"type": "http_error", "code": True, "message": "a bool is no code"}, protocol_error("a bool is no code")),
    ({"message": "Error (code 2): disk full"}, tool_error("Error (code 2): disk full")),
    ({"detail": "x"}, protocol_error('{"detail":"x"}')),
    (42, protocol_error("42")),
    (False, protocol_error("false")),
    (["a"], protocol_error('["a"]')),
])
def test_mcp_call_error_mapping(given, expected):
    assert mcp_call_error(given) == expected
    McpCall.model_validate({**MCP_CALL, "error": mcp_call_error(given)})
