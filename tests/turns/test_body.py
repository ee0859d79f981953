"""The request-input helpers a turn's body and `prepare()` decide with: a client's loop
limits as applied, the input as conversation items, the question's text (LCORE's
`extract_text_from_input`), approvals and item references. (The body both backends start
from, `backend_body`, through a turn: test_life.py.)"""

from __future__ import annotations

import pytest

from gateway.turns.body import answers_approval, as_input, has_item_reference, input_items, loop_limit, question_text


@pytest.mark.parametrize("asked, applied", [
    (None, 10), (0, 10), (-1, 10), (True, 10), ("5", 10), (5.0, 10),   # not a positive int: the default
    (1, 1), (49, 49), (50, 50), (51, 50), (10**9, 50),                 # at most the operator's limit
])
def test_a_clients_loop_limit(asked, applied):
    assert loop_limit(asked, 10, 50) == applied


def test_the_input_as_conversation_items():
    assert input_items("hi") == [{"type": "message", "role": "user", "content": "hi"}]
    assert input_items([{"role": "user", "content": "a"}, "junk", {"type": "function_call_output", "output": "1"}]) \
        == [{"type": "message", "role": "user", "content": "a"}, {"type": "function_call_output", "output": "1"}]


def test_an_added_message_loses_its_listing_only_fields():
    listed = {"type": "message", "id": "msg_1", "status": "completed", "role": "user", "content": "a"}
    assert as_input(listed) == {"type": "message", "role": "user", "content": "a"}
    call = {"type": "function_call_output", "id": "x", "status": "completed", "output": "1"}
    assert as_input(call) is call   # only messages carry fields the input refuses


def test_the_question_is_the_user_messages_text_only():
    assert question_text("what is RHEL?") == "what is RHEL?"
    assert question_text([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"},
                                                        {"type": "input_image", "image_url": "data:"},
                                                        {"type": "input_text", "text": ""}]},
        {"type": "function_call_output", "role": "user", "output": "not a question"},
        {"role": "assistant", "content": "an answer"},
    ]) == "first second"
    assert question_text(None) == "" and question_text({"role": "user"}) == ""


def test_approvals_and_item_references_are_found_in_the_input():
    approval = {"type": "mcp_approval_response", "approval_request_id": "r", "approve": True}
    assert answers_approval(["x", approval]) and not answers_approval("mcp_approval_response")
    assert has_item_reference({"input": [{"type": "item_reference", "id": "msg_1"}]})
    assert not has_item_reference({"input": "item_reference"}) and not has_item_reference([])
