"""Responses → Chat Completions translation, table by table (pure functions)."""

from __future__ import annotations

import pytest

from gateway.engine import file_search, translate
from gateway.schema.errors import ApiError

USER_HI = {"role": "user", "content": "hi"}
CALL_A = {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"location":"Paris"}'}
CALL_B = {"type": "function_call", "call_id": "call_b", "name": "get_time", "arguments": "{}"}
TOOL_CALL_A = {"id": "call_a", "type": "function", "function": {"name": "get_weather",
                                                                 "arguments": '{"location":"Paris"}'}}
TOOL_CALL_B = {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}

MESSAGES = [
    ("string input", "hi", None, [USER_HI]),
    ("instructions first", "hi", "Be terse.", [{"role": "system", "content": "Be terse."}, USER_HI]),
    ("item without type", [{"role": "user", "content": "hi"}], None, [USER_HI]),
    ("typed message", [{"type": "message", "role": "user", "content": "hi"}], None, [USER_HI]),
    ("part list", [{"role": "user", "content": [{"type": "input_text", "text": "a"},
                                                {"type": "input_text", "text": "b"}]}], None,
     [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]),
    ("system role", [{"role": "system", "content": "rules"}, USER_HI], None,
     [{"role": "system", "content": "rules"}, USER_HI]),
    ("developer is system", [{"role": "developer", "content": [{"type": "input_text", "text": "dev"}]}], None,
     [{"role": "system", "content": [{"type": "text", "text": "dev"}]}]),
    ("image by url", [{"role": "user", "content": [
        {"type": "input_text", "text": "what is it?"},
        {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "low"}]}], None,
     [{"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                   {"type": "image_url", "image_url": {"url": "https://example.com/cat.png",
                                                                       "detail": "low"}}]}]),
    ("image by data url", [{"role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}]}], None,
     [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=",
                                                                       "detail": "auto"}}]}]),
    ("file by data", [{"role": "user", "content": [
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}]}], None,
     [{"role": "user", "content": [{"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=",
                                                             "filename": "a.pdf"}}]}]),
    ("assistant output text", [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "Hello", "annotations": []}]}], None,
     [{"role": "assistant", "content": "Hello"}]),
    ("consecutive calls merged", [USER_HI, CALL_A, CALL_B,
                                  {"type": "function_call_output", "call_id": "call_a", "output": "21 C"},
                                  {"type": "function_call_output", "call_id": "call_b", "output": "noon"}], None,
     [USER_HI, {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_A, TOOL_CALL_B]},
      {"role": "tool", "tool_call_id": "call_a", "content": "21 C"},
      {"role": "tool", "tool_call_id": "call_b", "content": "noon"}]),
    ("calls split by output", [CALL_A, {"type": "function_call_output", "call_id": "call_a", "output": "x"}, CALL_B],
     None, [{"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_A]},
            {"role": "tool", "tool_call_id": "call_a", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_B]}]),
    ("earlier mcp call", [{"type": "mcp_call", "id": "mcp_1", "name": "lookup", "server_label": "docs",
                           "arguments": '{"q":"x"}', "output": "found"}], None,
     [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "mcp_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}}]},
      {"role": "tool", "tool_call_id": "mcp_1", "content": "found"}]),
    ("failed mcp call", [{"type": "mcp_call", "id": "mcp_2", "name": "lookup", "server_label": "docs",
                          "arguments": "{}", "output": None, "error": {"type": "mcp_protocol_error", "code": 0,
                                                                       "message": "boom"}}], None,
     [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "mcp_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "mcp_2", "content": "Error: boom"}]),
    ("earlier file search", [{"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed",
                              "results": [{"file_id": "file-1", "filename": "a.txt", "score": 2.0, "text": "hit"}]}],
     None,
     [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "fs_1", "type": "function", "function": {"name": "file_search", "arguments": '{"query":"q"}'}}]},
      {"role": "tool", "tool_call_id": "fs_1", "content": 'file_search found 1 chunks for "q".\n'
                                                          '[1] <|file-1|> a.txt (score 2)\nhit\n'
                                                          'Use these results only to answer the query. '
                                                          + file_search.CITE_INSTRUCTION}]),
    ("earlier file search without its results", [{"type": "file_search_call", "id": "fs_1", "queries": ["q"],
                                                  "status": "completed", "results": None}], None,
     [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "fs_1", "type": "function", "function": {"name": "file_search", "arguments": '{"query":"q"}'}}]},
      {"role": "tool", "tool_call_id": "fs_1", "content": 'file_search ran for ["q"]; its results were not kept '
                                                          '(the request did not include file_search_call.results). '
                                                          'Search again if they are needed.'}]),
    ("earlier web search", [{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {
        "type": "search", "query": "q", "sources": [{"type": "url", "url": "https://a/"}]}}], None,
     [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "ws_1", "type": "function", "function": {"name": "web_search", "arguments": '{"query":"q"}'}}]},
      {"role": "tool", "tool_call_id": "ws_1", "content": "Searched (completed): https://a/"}]),
    ("failed web search", [{"type": "web_search_call", "id": "ws_2", "status": "failed", "action": {
        "type": "search", "query": "q"}}], None,
     [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "ws_2", "type": "function", "function": {"name": "web_search", "arguments": '{"query":"q"}'}}]},
      {"role": "tool", "tool_call_id": "ws_2", "content": "Searched (failed)"}]),
    ("reasoning skipped", [{"type": "reasoning", "id": "rs_1", "summary": []}, USER_HI], None, [USER_HI]),
    ("output as parts", [{"type": "function_call_output", "call_id": "c", "output": [
        {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}], None,
     [{"role": "tool", "tool_call_id": "c", "content": "ab"}]),
]


@pytest.mark.parametrize("name, input_, instructions, expected", MESSAGES, ids=[row[0] for row in MESSAGES])
def test_messages(name, input_, instructions, expected):
    assert translate.to_messages(translate.input_items(input_), instructions, {}) == expected


def test_item_reference_resolves_from_the_history():
    earlier = {"id": "msg_1", "type": "message", "role": "user", "content": "from before"}
    messages = translate.to_messages([{"type": "item_reference", "id": "msg_1"}], None, {"msg_1": earlier})
    assert messages == [{"role": "user", "content": "from before"}]
    with pytest.raises(ApiError) as raised:
        translate.to_messages([{"type": "item_reference", "id": "msg_x"}], None, {})
    assert raised.value.status == 422


REFUSED = [
    ("input_file by url", {"input": [{"role": "user", "content": [{"type": "input_file",
                                                                   "file_url": "https://x/a.pdf"}]}]}, "input"),
    ("image by file id", {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
     "input"),
    ("stored prompt", {"input": "hi", "prompt": {"id": "pmpt_1"}}, "prompt"),
    ("code_interpreter tool", {"input": "hi", "tools": [{"type": "code_interpreter", "container": "auto"}]}, "tools"),
    ("function named file_search beside file_search", {"input": "hi", "tools": [
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "function", "name": "file_search", "parameters": {}}]}, "tools"),
    ("unknown item", {"input": [{"type": "computer_call", "id": "c"}]}, "input"),
    ("image in system", {"input": [{"role": "system", "content": [{"type": "input_image",
                                                                   "image_url": "http://x"}]}]}, "input"),
    ("hosted tool_choice", {"input": "hi", "tool_choice": {"type": "code_interpreter"}}, "tool_choice"),
    ("text format grammar", {"input": "hi", "text": {"format": {"type": "grammar"}}}, "text"),
]


@pytest.mark.parametrize("name, body, param", REFUSED, ids=[row[0] for row in REFUSED])
def test_refused_with_a_clear_422(name, body, param):
    with pytest.raises(ApiError) as raised:
        translate.check_request(body)
    assert raised.value.status == 422 and raised.value.param == param
    assert raised.value.code == "unsupported_by_engine"


TOOL_CHOICES = [
    (None, None, None),
    ("auto", "auto", None),
    ("required", "required", None),
    ("none", "none", None),
    ({"type": "function", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}, None),
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "a"}]}, "required",
     frozenset({"a"})),
    ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "a"},
                                                         {"type": "function", "name": "b"}]}, "auto",
     frozenset({"a", "b"})),
    ({"type": "file_search"}, {"type": "function", "function": {"name": "file_search"}}, None),
    ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "file_search"}]}, "auto",
     frozenset({"file_search"})),
]


@pytest.mark.parametrize("choice, expected, allowed", TOOL_CHOICES)
def test_tool_choice(choice, expected, allowed):
    assert translate.tool_choice(choice) == (expected, allowed)


def test_function_tools_nested_with_strict_kept():
    tool = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}
    assert translate.chat_tools([tool]) == [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}}]


OPTIONS = [
    ({"temperature": 0.2, "top_p": 0.9, "max_output_tokens": 64}, False,
     {"temperature": 0.2, "top_p": 0.9, "max_tokens": 64}),
    ({"parallel_tool_calls": False}, True, {"parallel_tool_calls": False}),
    ({"parallel_tool_calls": False}, False, {}),  # without tools, servers refuse it
    ({"metadata": {"k": "v"}, "safety_identifier": "u1"}, False, {"metadata": {"k": "v"}, "user": "u1"}),
    ({"top_logprobs": 3}, False, {"top_logprobs": 3, "logprobs": True}),
    ({"reasoning": {"effort": "low"}}, False, {"reasoning_effort": "low"}),
    ({"text": {"format": {"type": "json_object"}}}, False, {"response_format": {"type": "json_object"}}),
    ({"text": {"format": {"type": "json_schema", "name": "city", "schema": {"type": "object"}, "strict": True}}},
     False, {"response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": {"type": "object"},
                                                                        "strict": True}}}),
    ({"text": {"format": {"type": "text"}}}, False, {}),
]


@pytest.mark.parametrize("body, has_tools, expected", OPTIONS)
def test_options(body, has_tools, expected):
    assert translate.chat_options(body, has_tools) == expected


USAGE = [
    (None, (0, 0, 0, 0, 0)),
    ({"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}, (5, 7, 12, 0, 0)),
    ({"prompt_tokens": 5, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 2},
      "completion_tokens_details": {"reasoning_tokens": 3}}, (5, 7, 12, 2, 3)),
]


@pytest.mark.parametrize("chat, expected", USAGE)
def test_usage(chat, expected):
    usage = translate.usage_of(chat)
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"],
            usage["input_tokens_details"]["cached_tokens"],
            usage["output_tokens_details"]["reasoning_tokens"]) == expected


def test_usage_summed():
    total = translate.add_usage(translate.usage_of({"prompt_tokens": 1, "completion_tokens": 2}),
                                translate.usage_of({"prompt_tokens": 10, "completion_tokens": 20}))
    assert (total["input_tokens"], total["output_tokens"], total["total_tokens"]) == (11, 22, 33)


@pytest.mark.parametrize("finish, reason", [("stop", None), ("tool_calls", None), ("length", "max_output_tokens"),
                                            ("content_filter", "content_filter"), (None, None)])
def test_incomplete_reason(finish, reason):
    assert translate.incomplete_reason(finish) == reason
