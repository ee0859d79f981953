"""LCORE's feedback body: a conversation id in either form, a sentiment of -1 or 1,
categories from LCORE's list (deduplicated, in order; an empty list is none), at least
one form of feedback; and LCORE's messages for each refusal. (The endpoints:
tests/e2e/test_feedback.py.)"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.schema.feedback import FeedbackCategory, FeedbackRequest

BASE = {"conversation_id": "0" * 48, "user_question": "q", "llm_response": "a"}


def message(**fields) -> str:
    with pytest.raises(ValidationError) as refused:
        FeedbackRequest.model_validate({**BASE, **fields})
    [error] = refused.value.errors()
    return error["msg"]


def test_any_one_form_of_feedback_is_enough():
    assert FeedbackRequest.model_validate({**BASE, "sentiment": -1}).sentiment == -1
    assert FeedbackRequest.model_validate({**BASE, "user_feedback": "vague"}).user_feedback == "vague"
    request = FeedbackRequest.model_validate({**BASE, "categories": ["unsafe", "other", "unsafe"]})
    assert request.categories == [FeedbackCategory.UNSAFE, FeedbackCategory.OTHER]
    assert FeedbackRequest.model_validate({**BASE, "conversation_id": "conv_" + "a" * 48, "sentiment": 1})


def test_no_feedback_at_all_is_refused():
    # An empty list of categories and an empty text count as none.
    assert message(categories=[], user_feedback="") == ("Value error, At least one form of feedback must be provided: "
                                                        "'sentiment', 'user_feedback', or 'categories'")


@pytest.mark.parametrize("fields, says", [
    ({"conversation_id": "not-an-id", "sentiment": 1}, "Value error, Improper conversation ID not-an-id"),
    ({"sentiment": 0}, "Value error, Improper sentiment value of 0, needs to be -1 or 1"),
    ({"sentiment": 5}, "Value error, Improper sentiment value of 5, needs to be -1 or 1"),
    ({"categories": ["rude"]}, "Input should be 'incorrect', 'not_relevant', 'incomplete', 'outdated_information', "
                               "'unsafe' or 'other'"),
    ({"user_feedback": "x" * 4097}, "String should have at most 4096 characters"),
    ({"sentiment": 1, "rating": 5}, "Extra inputs are not permitted"),
])
def test_lcores_messages(fields, says):
    assert message(**fields) == says
