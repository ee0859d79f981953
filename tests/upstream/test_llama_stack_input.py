from __future__ import annotations

import pytest

from gateway.upstream.llama_stack_input import error_text, for_llama_stack

CALL = {"type": "mcp_call", "id": "m", "name": "add", "arguments": "{}", "server_label": "calc"}


@pytest.mark.parametrize("error, text", [
    ({"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "boom"}, {"type": "text", "text": "!"}]},
     "boom\n!"),
    ({"type": "mcp_protocol_error", "code": -32601, "message": "Method not found"}, "Method not found"),
    ({"type": "http_error", "code": 502, "message": "Bad gateway"}, "Bad gateway"),
    ({"type": "something_else"}, '{"type":"something_else"}'),
])
def test_error_text(error, text):
    assert error_text(error) == text


def test_only_object_errors_change():
    items = [{"role": "user", "content": "hi"}, {**CALL, "error": "already text"},
             {**CALL, "error": {"type": "mcp_protocol_error", "code": 1, "message": "bad"}}]
    converted = for_llama_stack(items)
    assert converted[:2] == items[:2] and converted[2] == {**CALL, "error": "bad"}
    assert items[2]["error"]["message"] == "bad", "the client's request is not modified"
    untouched = items[:2]
    assert for_llama_stack(untouched) is untouched
