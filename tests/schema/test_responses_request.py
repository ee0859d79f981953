"""The create-response request: LCORE's exact 422 bodies (captured from LCORE's model
under FastAPI, `tests/fixtures/lcore/`), LCORE's lax types, and what the gateway accepts
beyond LCORE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.schema.errors import ApiError
from gateway.schema.responses_request import (converted_scalars, forwarded_scalars, parse_responses_request,
                                              provider_data_header)
from gateway.schema.json_body import parse_json_body

HEX = "ab" * 24
LCORE_CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "lcore" / "responses-validation.json").read_text())


def refused(raw, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_responses_request(raw, **kwargs)
    assert caught.value.status == 422
    return caught.value


def decode_and_parse(case: dict) -> None:
    raw = parse_json_body(case["raw_request"].encode()) if "raw_request" in case else case["request"]
    parse_responses_request(raw)


@pytest.mark.parametrize("name", [name for name, case in LCORE_CASES.items() if case["status"] == 422])
def test_refused_exactly_as_lcore(name):
    case = LCORE_CASES[name]
    with pytest.raises(ApiError) as caught:
        decode_and_parse(case)
    assert caught.value.status == 422
    assert caught.value.body(openai=False) == case["body"]


@pytest.mark.parametrize("name", [name for name, case in LCORE_CASES.items() if case["status"] == 200])
def test_accepted_as_lcore_accepts(name):
    decode_and_parse(LCORE_CASES[name])


def test_valid_request_keeps_everything_openai_sends():
    request = parse_responses_request({
        "input": [{"role": "user", "content": "hi"},
                  {"type": "function_call_output", "call_id": "c", "output": "x"},
                  {"type": "mcp_approval_response", "approval_request_id": "a", "approve": True}],
        "model": "m", "conversation": {"id": f"conv_{HEX}"}, "include": ["file_search_call.results"],
        "instructions": "be brief", "max_output_tokens": 10, "metadata": {"k": "v"}, "parallel_tool_calls": False,
        "prompt": {"id": "p"}, "store": True, "stream": True, "temperature": 0.5, "top_p": 1,
        "text": {"format": {"type": "text"}}, "tool_choice": {"type": "function", "name": "f"},
        "reasoning": {"effort": "low"}, "truncation": "auto",
        "tools": [{"type": "function", "name": "f", "parameters": None}, {"type": "web_search_preview"},
                  {"type": "file_search", "vector_store_ids": ["vs"], "max_num_results": 5},
                  {"type": "mcp", "server_label": "s", "server_url": "http://s", "headers": {"a": "b"}}],
        "generate_topic_summary": False, "solr": {"mode": "hybrid"}, "safety_identifier": "u1",
        "max_infer_iters": 3, "max_tool_calls": 2, "background": False,
        "stream_options": {"include_obfuscation": False},
    })
    assert request.conversation_id == HEX and request.stream


def test_mcp_call_error_may_be_an_object():
    # The gateway returns `mcp_call.error` as the `openai` object; clients send it back.
    item = {"type": "mcp_call", "id": "m", "arguments": "{}", "name": "n", "server_label": "s",
            "error": {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": "boom"}]}}
    parse_responses_request({"input": [item]})


@pytest.mark.parametrize("raw, loc", [
    ({"input": "x", "max_tool_calls": 0}, ["body", "max_tool_calls"]),
    ({"input": "x", "temperature": 3}, ["body", "temperature"]),
    ({"input": "x", "truncation": "sometimes"}, ["body", "truncation"]),
    ({"input": "x", "conversation": {"name": "no id"}}, ["body", "conversation"]),
    ({"input": "x", "user": "legacy"}, ["body", "user"]),
])
def test_refused_beyond_lcore(raw, loc):
    assert refused(raw).detail[0]["loc"] == loc


def test_configured_mcp_server_needs_no_url_and_keeps_its_own():
    configured = {"calc": "http://calc/mcp"}
    parse_responses_request({"input": "x", "tools": [{"type": "mcp", "server_label": "calc"}]},
                            configured_mcp=configured)
    parse_responses_request({"input": "x", "tools": [{"type": "mcp", "server_label": "calc",
                                                      "server_url": "http://calc/mcp"}]}, configured_mcp=configured)
    error = refused({"input": "x", "tools": [{"type": "mcp", "server_label": "calc",
                                              "server_url": "http://evil/mcp"}]}, configured_mcp=configured)
    assert error.detail[0]["loc"] == ["body", "tools", 0, "mcp"]
    assert "configured by the operator" in error.detail[0]["msg"]


def test_unconfigured_mcp_server_needs_a_url_as_in_lcore():
    error = refused({"input": "x", "tools": [{"type": "mcp", "server_label": "calc"}]})
    assert error.detail[0]["msg"] == "Value error, Either 'server_url' or 'connector_id' must be provided for MCP tool"


def test_the_openai_error_object_summarises_the_list():
    body = refused({"input": "hi", "bogus": 1}).body()
    assert body["error"] == {"message": "Invalid request: bogus: Extra inputs are not permitted",
                             "type": "invalid_request_error", "code": "unknown_parameter", "param": "bogus"}


@pytest.mark.parametrize("raw, changed", [
    ({"input": "x", "stream": "true", "temperature": "0.5", "max_output_tokens": 64.0},
     {"stream": True, "temperature": 0.5, "max_output_tokens": 64}),
    ({"input": "x", "stream": True, "temperature": 0.5, "metadata": {"a": "b"}}, {}),
])
def test_forwarded_scalars_are_the_converted_values(raw, changed):
    assert forwarded_scalars(raw, parse_responses_request(raw)) == changed


def test_empty_conversation_and_previous_response_id_mean_none():
    request = parse_responses_request({"input": "x", "conversation": "", "previous_response_id": ""})
    assert request.conversation_id is None and request.previous_id is None


@pytest.mark.parametrize("solr", [
    {"mode": "hybrid", "filters": {"fq": ["product:x"]}},
    {"filters": {"q": "\u00e9t\u00e9 \u65e5\u672c \U0001F600 \u2028 \x7f \x00 \n \" \\"}},
])
def test_provider_data_header_is_printable_ascii_json(solr):
    header = provider_data_header(solr)
    assert all(" " <= char <= "~" for char in header)
    assert json.loads(header) == {"solr": solr}


def test_converted_scalars_inside_tools_take_their_validated_values():
    raw = {"input": "x", "tools": [
        {"type": "function", "name": "f", "parameters": None, "strict": 0},
        {"type": "file_search", "vector_store_ids": ["vs_1"], "ranking_options": {"score_threshold": False}},
        {"type": "function", "name": "g", "parameters": {"type": "object"}, "strict": True}]}
    request = parse_responses_request(raw)
    tools = [converted_scalars(tool, model) for tool, model in zip(raw["tools"], request.tools)]
    assert tools[0]["strict"] is False and raw["tools"][0]["strict"] == 0   # a copy: the raw body is untouched
    assert type(tools[1]["ranking_options"]["score_threshold"]) is float
    assert tools[2] is raw["tools"][2]   # nothing converted: the same object, no copy
    assert tools[1]["vector_store_ids"] is raw["tools"][1]["vector_store_ids"]
