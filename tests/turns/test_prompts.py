"""The system prompt a turn sends (`turns/prompts.py`): the request's own, the
operator's, LCORE's default, or a 422 where the operator disabled them; the response
shows the operator's prompt as LCORE's placeholder."""

from __future__ import annotations

import pytest

from gateway.config import parse_config
from gateway.schema.errors import ApiError
from gateway.schema.responses_request import parse_responses_request
from gateway.turns.prompts import SystemPrompts
from tests.turns.test_life import Body, _conversation_count, life, store  # noqa: F401 (fixture)

MINIMAL = {"name": "prompts", "llama_stack": {"url": "http://127.0.0.1:1"}}


def prompts(**customization) -> SystemPrompts:
    return SystemPrompts(parse_config({**MINIMAL, "customization": customization}).customization)


@pytest.mark.parametrize("customization, sent, expected, server", [
    ({}, None, "You are a helpful assistant", True),
    ({}, "", "You are a helpful assistant", True),           # an empty prompt is none, as in LCORE
    ({}, "Be terse.", "Be terse.", False),
    ({"system_prompt": "Operator's."}, None, "Operator's.", True),
    ({"system_prompt": "Operator's."}, "Be terse.", "Be terse.", False),
    ({"system_prompt": ""}, None, None, False),               # the operator's way to send none
    ({"disable_query_system_prompt": True}, None, "You are a helpful assistant", True),
    ({"disable_query_system_prompt": True}, "", "You are a helpful assistant", True),
])
def test_resolution(customization, sent, expected, server):
    request = parse_responses_request({"input": "hi", **({} if sent is None else {"instructions": sent})})
    assert prompts(**customization).apply(request) is server
    assert request.instructions == expected


@pytest.mark.parametrize("field", ["instructions", "system_prompt"])
def test_disabled_is_lcores_422_naming_the_field(field):
    request = parse_responses_request({"input": "hi", "instructions": "Be terse."})
    with pytest.raises(ApiError) as refused:
        prompts(disable_query_system_prompt=True).apply(request, field)
    error = refused.value
    assert (error.status, error.response) == (422, "System prompt customization is disabled")
    assert error.cause == ("This instance does not support customizing the system prompt in the query request "
                           f"(disable_query_system_prompt is set). Please remove the {field} field from your request.")


async def test_the_body_carries_the_prompt_and_the_answer_hides_the_operators(store):  # noqa: F811
    turns = life(store, customization={"system_prompt": "Secret house rules."})
    turn = await turns.prepare()
    assert turn.body["instructions"] == "Secret house rules." and turn.plan.server_prompt
    sink = Body()
    await turns.runner.run(turn, sink)
    assert sink.responses[0]["instructions"] == "<server prompt applied>"
    own = await turns.prepare(instructions="Mine.")
    assert own.body["instructions"] == "Mine." and not own.plan.server_prompt


async def test_a_disabled_prompt_is_refused_with_nothing_created(store):  # noqa: F811
    turns = life(store, customization={"disable_query_system_prompt": True})
    with pytest.raises(ApiError) as refused:
        await turns.prepare(instructions="Be terse.")
    assert refused.value.status == 422
    assert turns.backend.conversations_created == 0 and turns.backend.summaries == []
    assert await _conversation_count(turns.repository) == 0
    assert turns.quota.released == [0]   # the reservation given back
