"""`legacy/infer.py`: LCORE's input joining, the response body with and without metadata,
the empty-answer fallback (the sandboxed template: test_infer_prompt.py)."""

from __future__ import annotations


import pytest

from gateway.legacy.infer import UNABLE_TO_PROCESS, infer_response, input_source, parse_infer_request
from gateway.schema.errors import ApiError

RESPONSE = {"status": "completed", "usage": {"input_tokens": 7, "output_tokens": 3},
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Yes."}]}]}


@pytest.mark.parametrize("context, joined", [
    ({}, "Q"),
    ({"stdin": "in", "terminal": {"output": "out"}}, "Q\n\nin\n\nout"),
    ({"attachments": {"contents": "file", "mimetype": "text/plain"}, "stdin": ""}, "Q\n\nfile"),
    ({"stdin": "in", "attachments": {"contents": "file"}, "terminal": {"output": "out"}}, "Q\n\nin\n\nfile\n\nout"),
])
def test_input_source_in_lcores_order(context, joined):
    assert input_source(parse_infer_request({"question": " Q ", "context": context})) == joined


def test_system_id_under_its_alias():
    request = parse_infer_request({"question": "q", "context": {"systeminfo": {"id": "machine-1"}}})
    assert request.context.systeminfo.system_id == "machine-1"


def test_attachments_is_one_object_not_a_list():
    with pytest.raises(ApiError) as refused:
        parse_infer_request({"question": "q", "context": {"attachments": [{"contents": "x"}]}})
    assert refused.value.status == 422


def test_minimal_and_verbose_bodies():
    assert infer_response("rid", RESPONSE, verbose=False) == {"data": {"text": "Yes.", "request_id": "rid"}}
    verbose = infer_response("rid", RESPONSE, verbose=True)["data"]
    assert verbose == {"text": "Yes.", "request_id": "rid", "tool_calls": [], "tool_results": [], "rag_chunks": [],
                       "referenced_documents": [], "input_tokens": 7, "output_tokens": 3}


def test_an_empty_answer_is_lcores_fallback():
    empty = {"status": "completed", "output": []}
    assert infer_response("rid", empty, verbose=False)["data"]["text"] == UNABLE_TO_PROCESS == \
        "Unable to process this request"
