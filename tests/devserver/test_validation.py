"""The stand-in's request validation of POST /v1/responses, as pydantic's error list
worded as Llama Stack words it: empty for an acceptable body, one entry per problem with
its location otherwise. (The 400 it becomes: test_responses.py.)"""

from __future__ import annotations

import pytest

from gateway.devserver.validation import check_create

OK = {"model": "scripted-chat", "input": "hi"}


def locs(body: dict) -> list[tuple]:
    return [tuple(error["loc"]) for error in check_create(body)]


def test_an_acceptable_body_has_no_errors():
    assert check_create(OK) == []
    assert check_create({**OK, "input": [{"role": "user", "content": "hi"},
                                         {"type": "function_call_output", "call_id": "c", "output": "1"}],
                         "tools": [{"type": "function", "name": "f"}, {"type": "mcp", "server_label": "s"},
                                   {"type": "file_search", "vector_store_ids": []}],
                         "instructions": "be brief", "metadata": {"k": "v"}}) == []


def test_every_problem_is_reported_at_its_location():
    assert locs({}) == [("body", "input"), ("body", "model")]
    assert locs({**OK, "model": 7, "instructions": 1, "previous_response_id": [], "metadata": "x"}) == [
        ("body", "model"), ("body", "previous_response_id"), ("body", "instructions"), ("body", "metadata")]


def test_input_items_by_their_tag():
    errors = check_create({**OK, "input": ["text", {"type": "bogus"}, {"type": "message", "role": "user"},
                                           {"type": "mcp_approval_response", "approve": True}]})
    assert [(e["loc"], e["type"]) for e in errors] == [
        (["body", "input", 0], "model_attributes_type"),
        (["body", "input", 1], "union_tag_invalid"),
        (["body", "input", 2, "message", "content"], "missing"),
        (["body", "input", 3, "mcp_approval_response", "approval_request_id"], "missing"),
    ]
    assert errors[1]["msg"] == "Input tag 'bogus' found using 'type' does not match any of the expected tags"
    # Neither a string nor a list: both of the union's branches fail, as pydantic reports.
    assert [e["type"] for e in check_create({**OK, "input": 3})] == ["string_type", "list_type"]


@pytest.mark.parametrize("tools, loc, kind", [
    ({"type": "function"}, ["body", "tools"], "list_type"),
    ([{"name": "f"}], ["body", "tools", 0], "union_tag_not_found"),
    (["f"], ["body", "tools", 0], "union_tag_not_found"),
    ([{"type": "code_interpreter"}], ["body", "tools", 0], "union_tag_invalid"),
    ([{"type": "function"}], ["body", "tools", 0, "function", "name"], "missing"),
    ([{"type": "function", "name": 1}], ["body", "tools", 0, "function", "name"], "string_type"),
    ([{"type": "mcp"}], ["body", "tools", 0, "mcp", "server_label"], "missing"),
    ([{"type": "file_search"}], ["body", "tools", 0, "file_search", "vector_store_ids"], "missing"),
])
def test_tools_by_their_tag(tools, loc, kind):
    assert [(e["loc"], e["type"]) for e in check_create({**OK, "tools": tools})] == [(loc, kind)]
