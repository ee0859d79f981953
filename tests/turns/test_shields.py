"""`turns/shields.py`: selection by `shield_ids`, redaction of every user text shape,
and the configuration's checks."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.schema.errors import ApiError
from gateway.turns.shields import Shields


def config(shields, **customization):
    return parse_config({"name": "t", "llama_stack": {"url": "http://127.0.0.1:1"}, "shields": shields,
                         "customization": customization})


PII = {"name": "pii", "provider_id": "redaction", "config": {"rules": [{"pattern": r"\d{4}", "replacement": "#"}]}}
VALID = {"name": "topic", "provider_id": "question_validity"}


def test_selection():
    shields = Shields(config([PII, VALID]))
    assert shields.select(None) == ["pii", "topic"]
    assert shields.select(["topic", "topic"]) == ["topic"]
    assert shields.select([]) == []
    with pytest.raises(ApiError) as missing:
        shields.select(["pii", "x"])
    assert missing.value.status == 404 and missing.value.cause == "Shield(s) with ID(s) x do not exist"
    with pytest.raises(ApiError) as locked:
        Shields(config([PII], disable_shield_ids_override=True)).select([])
    assert locked.value.status == 422


def test_redaction_of_every_user_text():
    shields = Shields(config([PII]))
    raw = {"input": [
        {"role": "user", "content": "pin 1234"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "card 5678"},
                                                        {"type": "input_image", "image_url": "data:1234"}]},
        {"role": "assistant", "content": "said 9999"},
        {"type": "function_call_output", "call_id": "c", "output": "0000"}]}
    redacted = shields.redaction(["pii"])(raw["input"])
    assert redacted[0]["content"] == "pin #"
    assert redacted[1]["content"] == [{"type": "input_text", "text": "card #"},
                                      {"type": "input_image", "image_url": "data:1234"}]
    assert redacted[2]["content"] == "said 9999" and redacted[3]["output"] == "0000"
    assert raw["input"][0]["content"] == "pin 1234"   # a new input: the client's is left as it is
    assert shields.redaction([])("1234 and 12345") == "1234 and 12345"
    assert shields.redaction(["pii"])("1234 and 12345") == "# and #5"


@pytest.mark.parametrize("shields, reason", [
    ([{"name": "a", "provider_id": "redaction", "config": {"rules": [{"pattern": "(", "replacement": ""}]}}],
     "not a regular expression"),
    ([PII, PII], "shields names must be unique"),
    ([{"name": "a", "provider_id": "llama-guard"}], "provider_id"),
])
def test_bad_shields_fail_start_up(shields, reason):
    with pytest.raises(ConfigError) as refused:
        config(shields)
    assert reason in str(refused.value)


async def test_question_validity_asks_each_selected_shield_in_order():
    strict = {"name": "strict", "provider_id": "question_validity",
              "config": {"model_id": "judge", "model_prompt": "${message}|${allowed}|${rejected}",
                         "invalid_question_response": "No."}}
    shields = Shields(config([PII, VALID, strict]))
    asked = []

    async def ask(model, instructions, text):
        asked.append((model, text))
        return " ALLOWED\n" if model == "turn-model" else "REJECTED"

    assert await shields.judge(["pii", "topic"], "q?", "turn-model", ask) is None
    assert "Question:\nq?\nResponse:" in asked[0][1]
    assert await shields.judge(["topic", "strict"], "q?", "turn-model", ask) == "No."
    assert asked[-1] == ("judge", "q?|ALLOWED|REJECTED")
