"""The `shields` section: each shield by its `provider_id`, LCORE's defaults for a
question-validity shield, redaction rules that must compile; every refusal names its key.
(What the shields do to a turn: tests/turns/test_shields.py.)"""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.config.shields import (DEFAULT_VALIDITY_PROMPT, DEFAULT_VIOLATION_MESSAGE, QuestionValidityShield,
                                    RedactionShield)

MINIMAL = {"name": "x", "llama_stack": {"url": "http://upstream:8321"}}


def shields(*configured: dict) -> list:
    return parse_config({**MINIMAL, "shields": list(configured)}).shields


def problems(*configured: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        shields(*configured)
    return caught.value.problems


def test_each_shield_by_its_provider_with_lcores_defaults():
    validity, redaction = shields({"name": "topic", "provider_id": "question_validity"},
                                  {"name": "pii", "provider_id": "redaction",
                                   "config": {"rules": [{"pattern": r"(\d{3})-\d{4}", "replacement": r"\1-XXXX"}]}})
    assert isinstance(validity, QuestionValidityShield) and isinstance(redaction, RedactionShield)
    assert validity.config.model_id is None   # the turn's own model
    assert validity.config.model_prompt == DEFAULT_VALIDITY_PROMPT
    assert "${message}" in DEFAULT_VALIDITY_PROMPT and "${allowed}" in DEFAULT_VALIDITY_PROMPT
    assert validity.config.invalid_question_response == DEFAULT_VIOLATION_MESSAGE
    rule = redaction.config.rules[0]
    assert rule.case_sensitive is None and redaction.config.case_sensitive is False   # the rule follows its shield


def test_a_pattern_that_does_not_compile_is_refused_at_its_key():
    [problem] = problems({"name": "pii", "provider_id": "redaction",
                          "config": {"rules": [{"pattern": "(unclosed", "replacement": ""}]}})
    assert problem.startswith("shields[0].redaction.config.rules[0].pattern: not a regular expression")


@pytest.mark.parametrize("shield, key", [
    ({"name": "x", "provider_id": "llama_guard"}, "shields[0]"),
    ({"name": "", "provider_id": "redaction"}, "shields[0].redaction.name"),
    ({"name": "x", "provider_id": "redaction", "config": {"rules": [{"pattern": "", "replacement": ""}]}},
     "shields[0].redaction.config.rules[0].pattern"),
    ({"name": "x", "provider_id": "question_validity", "config": {"model": "m"}},
     "shields[0].question_validity.config.model"),
])
def test_refusals_name_the_key(shield, key):
    assert any(problem.startswith(key) for problem in problems(shield)), problems(shield)


def test_shield_names_are_unique():
    [problem] = problems({"name": "a", "provider_id": "redaction"}, {"name": "a", "provider_id": "question_validity"})
    assert "shields names must be unique" in problem
