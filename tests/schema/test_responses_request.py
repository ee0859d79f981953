from __future__ import annotations

import pytest

from gateway.schema.errors import ApiError
from gateway.schema.responses import parse_responses_request

HEX = "ab" * 24


def error(raw) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_responses_request(raw)
    assert caught.value.status == 422
    return caught.value


def test_valid_request_keeps_everything_openai_sends():
    request = parse_responses_request({
        "input": [{"role": "user", "content": "hi"},
                  {"type": "function_call_output", "call_id": "c", "output": "x"},
                  {"type": "mcp_approval_response", "approval_request_id": "a", "approve": True}],
        "model": "m", "conversation": {"id": f"conv_{HEX}"}, "include": ["file_search_call.results"],
        "instructions": "be brief", "max_output_tokens": 10, "metadata": {"k": "v"}, "parallel_tool_calls": False,
        "prompt": {"id": "p"}, "store": True, "stream": True, "temperature": 0.5, "top_p": 1, "text": {"format": {"type": "text"}},
        "tool_choice": {"type": "function", "name": "f"}, "reasoning": {"effort": "low"}, "truncation": "auto",
        "tools": [{"type": "function", "name": "f"}, {"type": "web_search_preview"},
                  {"type": "file_search", "vector_store_ids": ["vs"], "max_num_results": 5},
                  {"type": "mcp", "server_label": "s", "server_url": "http://s", "headers": {"a": "b"}}],
        "generate_topic_summary": False, "solr": {"mode": "hybrid"}, "safety_identifier": "u1",
        "max_infer_iters": 3, "max_tool_calls": 2, "background": False, "stream_options": {"include_obfuscation": False},
    })
    assert request.conversation_id == HEX and request.stream


@pytest.mark.parametrize("raw, param", [
    ({"input": "x", "tools": [{"type": "file_search"}]}, "tools"),
    ({"input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["a"], "max_num_results": 99}]}, "tools"),
    ({"input": "x", "tools": [{"type": "mcp", "server_label": "s", "headers": "h"}]}, "tools"),
    ({"input": "x", "tool_choice": "sometimes"}, "tool_choice"),
    ({"input": "x", "tool_choice": {"type": "nope"}}, "tool_choice"),
    ({"input": [{"type": "function_call", "name": "f"}]}, "input"),
    ({"input": [{"type": "mcp_approval_response", "approval_request_id": "a", "approve": "yes"}]}, "input"),
    ({"input": [{"type": "message", "role": "user", "content": [{"type": "video"}]}]}, "input"),
    ({"input": "x", "prompt": {"variables": {}}}, "prompt"),
    ({"input": "x", "max_tool_calls": 0}, "max_tool_calls"),
    ({"input": "x", "truncation": "sometimes"}, "truncation"),
    ({"input": "x", "conversation": {"name": "no id"}}, "conversation"),
    ({"input": "x", "previous_response_id": "  "}, "previous_response_id"),
    ({"input": "x", "user": "legacy"}, "user"),
])
def test_invalid(raw, param):
    assert error(raw).param == param


def test_not_an_object():
    assert error([]).code == "invalid_body"
