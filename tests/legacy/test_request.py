"""LCORE's QueryRequest and its translation into a Responses request (tables)."""

from __future__ import annotations

import base64

import pytest

from gateway.legacy import request as request_module
from gateway.legacy.request import overrides_model, parse_query_request, responses_request
from gateway.schema.errors import ApiError

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n1234").decode()
MCP = {"calc": "http://mcp.example/mcp"}


@pytest.mark.parametrize("body, expected", [
    ({"query": "hi"},
     {"input": "hi", "stream": False, "store": True, "generate_topic_summary": True,
      "include": ["file_search_call.results"]}),
    ({"query": "hi", "conversation_id": "conv_" + "a" * 48, "provider": "p", "model": "m", "system_prompt": "S",
      "generate_topic_summary": False},
     {"input": "hi", "stream": False, "store": True, "generate_topic_summary": False,
      "conversation": "conv_" + "a" * 48, "model": "p/m", "instructions": "S", "include": ["file_search_call.results"]}),
    ({"query": "hi", "no_tools": True, "vector_store_ids": ["x"]},
     {"input": "hi", "stream": False, "store": True, "generate_topic_summary": True, "tool_choice": "none"}),
    ({"query": "hi", "vector_store_ids": ["okp"]},
     {"input": "hi", "stream": False, "store": True, "generate_topic_summary": True,
      "include": ["file_search_call.results"],
      "tools": [{"type": "file_search", "vector_store_ids": ["okp"]},
                {"type": "mcp", "server_label": "calc", "server_url": "http://mcp.example/mcp"}]}),
    ({"query": "hi", "vector_store_ids": []},
     {"input": "hi", "stream": False, "store": True, "generate_topic_summary": True,
      "include": ["file_search_call.results"],
      "tools": [{"type": "mcp", "server_label": "calc", "server_url": "http://mcp.example/mcp"}]}),
    ({"query": "hi", "shield_ids": ["s"], "solr": {"mode": "hybrid", "filters": {"a": 1}}, "no_tools": True},
     {"input": "hi", "stream": False, "store": True, "generate_topic_summary": True, "tool_choice": "none",
      "shield_ids": ["s"], "solr": {"mode": "hybrid", "filters": {"a": 1}}}),
    ({"query": "q", "no_tools": True, "attachments": [
        {"attachment_type": "stack trace", "content_type": "text/plain", "content": "boom"}]},
     {"input": "q\n\n[Attachment: stack trace]\nboom", "stream": False, "store": True,
      "generate_topic_summary": True, "tool_choice": "none"}),
    ({"query": "q", "no_tools": True, "attachments": [
        {"attachment_type": "image", "content_type": "image/png", "content": PNG}]},
     {"input": [{"type": "message", "role": "user", "content": [
         {"type": "input_text", "text": "q"},
         {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG}"}]}],
      "stream": False, "store": True, "generate_topic_summary": True, "tool_choice": "none"}),
])
def test_translation(body, expected):
    assert responses_request(parse_query_request(body), False, MCP) == expected


def test_a_stream_asks_for_one():
    assert responses_request(parse_query_request({"query": "q"}), True, {})["stream"] is True


@pytest.mark.parametrize("body, message", [
    ({"query": "q", "conversation_id": "nope"}, "Value error, Improper conversation ID 'nope'"),
    ({"query": "q", "model": "m"}, "Value error, Provider must be specified if model is specified"),
    ({"query": "q", "provider": "p"}, "Value error, Model must be specified if provider is specified"),
    ({"query": "q", "media_type": "text/html"}, "Input should be 'application/json' or 'text/plain'"),
    ({"query": "q", "other": 1}, "Extra inputs are not permitted"),
    ({"query": 1}, "Input should be a valid string"),
])
def test_fastapi_422s(body, message):
    with pytest.raises(ApiError) as refused:
        parse_query_request(body)
    assert refused.value.status == 422 and refused.value.detail[0]["msg"] == message


@pytest.mark.parametrize("attachment, fragment", [
    ({"attachment_type": "x", "content_type": "text/plain", "content": "c"}, "Invalid attachment type x"),
    ({"attachment_type": "log", "content_type": "text/x", "content": "c"}, "Invalid attachment content type text/x"),
])
def test_attachment_metadata_422s(attachment, fragment):
    with pytest.raises(ApiError) as refused:
        parse_query_request({"query": "q", "attachments": [attachment]})
    assert refused.value.status == 422 and refused.value.response == "Invalid attribute value"
    assert fragment in refused.value.cause


@pytest.mark.parametrize("attachment, message", [
    ({"attachment_type": "image", "content_type": "text/plain", "content": "c"},
     "attachment_type and content_type are inconsistent: attachment_type='image', content_type='text/plain'"),
    ({"attachment_type": "x", "content_type": "image/png", "content": PNG},
     "attachment_type and content_type are inconsistent: attachment_type='x', content_type='image/png'"),
    ({"attachment_type": "image", "content_type": "image/png", "content": "%%%"},
     "Invalid base64 content for image attachment: Only base64 data is allowed"),
    ({"attachment_type": "image", "content_type": "image/png", "content": base64.b64encode(b"GIF89a").decode()},
     "Image content does not match declared content_type 'image/png': invalid image data"),
    # LCORE's signatures: four bytes of PNG's, three of JPEG's.
    ({"attachment_type": "image", "content_type": "image/png", "content": base64.b64encode(b"\x89PNG").decode()},
     None),
    ({"attachment_type": "image", "content_type": "image/jpeg", "content": base64.b64encode(b"\xff\xd8\xff").decode()},
     None),
])
def test_image_attachments_are_the_models_value_errors(attachment, message):
    if message is None:
        assert parse_query_request({"query": "q", "attachments": [attachment]}).attachments
        return
    with pytest.raises(ApiError) as refused:
        parse_query_request({"query": "q", "attachments": [attachment]})
    assert refused.value.detail == [{"type": "value_error", "loc": ["body", "attachments", 0],
                                     "msg": f"Value error, {message}", "input": attachment, "ctx": {"error": {}}}]


def test_an_image_over_lcores_limit(monkeypatch):
    monkeypatch.setattr(request_module, "MAX_IMAGE_BYTES", 4)
    attachment = {"attachment_type": "image", "content_type": "image/png",
                  "content": base64.b64encode(b"\x89PNG\r").decode()}
    with pytest.raises(ApiError) as refused:
        parse_query_request({"query": "q", "attachments": [attachment]})
    assert refused.value.detail[0]["msg"] == ("Value error, Image attachment (5 bytes) exceeds maximum allowed size "
                                              "(4 bytes)")


def test_an_attachment_refuses_other_keys():
    attachment = {"attachment_type": "log", "content_type": "text/plain", "content": "c", "name": "x"}
    with pytest.raises(ApiError) as refused:
        parse_query_request({"query": "q", "attachments": [attachment]})
    assert refused.value.detail[0]["type"] == "extra_forbidden"
    assert refused.value.detail[0]["loc"] == ["body", "attachments", 0, "name"]


@pytest.mark.parametrize("body, overrides", [
    ({"query": "q"}, False), ({"query": "q", "provider": "p", "model": "m"}, True)])
def test_any_model_is_an_override(body, overrides):
    assert overrides_model(parse_query_request(body)) is overrides


def test_recorded_parts_cut_the_redacted_attachments_off():
    from gateway.legacy.request import recorded_parts
    log = {"attachment_type": "log", "content_type": "text/plain", "content": "secret line"}
    image = {"attachment_type": "image", "content_type": "image/png", "content": PNG}
    request = parse_query_request({"query": "why?", "attachments": [log, image]})
    question, attachments = recorded_parts("why [REDACTED]?\n\n[Attachment: log]\n[REDACTED] line", request)
    assert question == "why [REDACTED]?"
    assert attachments == ({**log, "content": "[REDACTED] line"}, image)
