"""Responses → Chat Completions translation, table by table (pure functions)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.engine import file_search, translate
from gateway.schema.errors import ApiError
from gateway.schema.responses_request import parse_responses_request

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


# -- properties (issue 42: fuzzing in CI, bounded and derandomized) ----------------------

TEXTS = st.text(max_size=12)
IDS = st.sampled_from(["call_a", "call_b", "fc_1", "mcp_1", "msg_1", ""]) | TEXTS
JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | TEXTS,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
                       max_leaves=8)
PART = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": TEXTS}),
    st.fixed_dictionaries({"type": st.just("input_image")},
                          optional={"image_url": st.none() | TEXTS, "file_id": st.none() | TEXTS,
                                    "detail": st.sampled_from(["low", "high", "auto"])}),
    st.fixed_dictionaries({"type": st.just("input_file")},
                          optional={"file_data": TEXTS, "file_id": TEXTS, "file_url": TEXTS, "filename": TEXTS}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": TEXTS}),
    st.fixed_dictionaries({"type": st.just("output_text"), "text": TEXTS, "annotations": st.just([])}),
)
CONTENT = TEXTS | st.lists(PART, max_size=3)
ITEM = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "developer", "assistant"]), "content": CONTENT},
                          optional={"type": st.just("message"), "id": IDS,
                                    "status": st.sampled_from(["completed", "in_progress"])}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": IDS, "name": TEXTS, "arguments": TEXTS},
                          optional={"id": IDS, "status": st.just("completed")}),
    st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": IDS,
                           "output": TEXTS | st.lists(PART, max_size=2)}),
    st.fixed_dictionaries({"type": st.just("mcp_call"), "id": IDS, "server_label": TEXTS, "name": TEXTS,
                           "arguments": TEXTS}, optional={"output": st.none() | TEXTS, "error": st.none() | TEXTS}),
    st.fixed_dictionaries({"type": st.just("item_reference"), "id": IDS}),
    st.fixed_dictionaries({"type": st.just("reasoning"), "id": IDS, "summary": st.just([])}),
    st.fixed_dictionaries({"type": st.just("file_search_call"), "id": IDS, "queries": st.lists(TEXTS, max_size=2),
                           "status": st.just("completed")}, optional={"results": st.none() | st.just([])}),
    st.fixed_dictionaries({"type": st.just("web_search_call"), "id": IDS, "status": st.just("completed"),
                           "action": st.fixed_dictionaries({"type": st.just("search"), "query": TEXTS},
                                                           optional={"sources": st.lists(st.fixed_dictionaries(
                                                               {"type": st.just("url"), "url": TEXTS}), max_size=2)})}),
)
TOOL = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "name": st.sampled_from(["f", "g", file_search.NAME])},
                          optional={"parameters": st.just({"type": "object", "properties": {}}),
                                    "strict": st.booleans(), "description": TEXTS}),
    st.fixed_dictionaries({"type": st.just("file_search"), "vector_store_ids": st.lists(TEXTS, max_size=2)}),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search", "web_search_preview"])}),
)
CHOICE = st.sampled_from(["auto", "none", "required", {"type": "file_search"}, {"type": "web_search"}]) | st.builds(
    lambda name: {"type": "function", "name": name}, st.sampled_from(["f", "g"])) | st.builds(
    lambda mode, names: {"type": "allowed_tools", "mode": mode, "tools": [{"type": "function", "name": n} for n in names]},
    st.sampled_from(["auto", "required"]), st.lists(st.sampled_from(["f", "g"]), max_size=2))
FORMAT = st.sampled_from([{"type": "text"}, {"type": "json_object"},
                          {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": True}])
BODY = st.fixed_dictionaries({"input": TEXTS | st.lists(ITEM, max_size=6)}, optional={
    "instructions": TEXTS, "tools": st.lists(TOOL, max_size=3), "tool_choice": CHOICE,
    "text": st.fixed_dictionaries({"format": FORMAT}), "temperature": st.floats(0, 2),
    "top_p": st.floats(0, 1), "max_output_tokens": st.integers(16, 4096), "parallel_tool_calls": st.booleans(),
    "metadata": st.dictionaries(st.text(min_size=1, max_size=4), TEXTS, max_size=2), "safety_identifier": TEXTS,
    "reasoning": st.fixed_dictionaries({"effort": st.sampled_from(["low", "medium", "high"])}),
    "top_logprobs": st.integers(0, 5)})


def _accepted(body: dict) -> bool:
    try:
        parse_responses_request(body, engine=True)
    except ApiError:
        return False
    return True


@settings(max_examples=200, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(body=BODY, history=st.lists(ITEM, max_size=4))
def test_no_request_the_gateway_accepts_crashes_the_translation(body, history):
    """Every request engine mode's validation lets through is translated, or refused with
    the engine's 422 (`ApiError`): never another exception (a 500), whatever the items,
    the conversation's stored history before them, the tools and the options."""
    assume(_accepted(body))
    try:
        translate.check_request(body)
        inputs = translate.input_items(body["input"])
        references = {str(item.get("id")): item for item in history if item.get("id")}
        messages = translate.to_messages(translate.input_items(history) + inputs, body.get("instructions"),
                                         references)
        tools = translate.chat_tools(body.get("tools"))
        translate.tool_choice(body.get("tool_choice"))
        options = translate.chat_options(body, bool(tools))
    except ApiError as refused:
        assert refused.status == 422
        return
    assert all(message["role"] in ("system", "user", "assistant", "tool") for message in messages)
    orjson.dumps({"messages": messages, "tools": tools, **options})   # what is sent serializes


@settings(max_examples=100, derandomize=True, deadline=None, database=None)
@given(usage=st.none() | st.fixed_dictionaries({}, optional={
    "prompt_tokens": st.none() | st.integers(0, 1 << 40), "completion_tokens": st.none() | st.integers(0, 1 << 40),
    "total_tokens": st.none() | st.integers(0, 1 << 41),
    "prompt_tokens_details": st.none() | st.fixed_dictionaries({}, optional={
        "cached_tokens": st.none() | st.integers(0, 1 << 20)}),
    "completion_tokens_details": st.none() | st.fixed_dictionaries({}, optional={
        "reasoning_tokens": st.none() | st.integers(0, 1 << 20)})}))
def test_any_chat_usage_maps_to_a_responses_usage(usage):
    mapped = translate.usage_of(usage)
    assert translate.add_usage(mapped, mapped)["total_tokens"] == 2 * mapped["total_tokens"]
