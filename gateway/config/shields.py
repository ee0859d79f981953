"""The `shields` section (LCORE's, run by the gateway itself): `question_validity`, a
model prompt that judges each question, and `redaction`, patterns that rewrite the
input before anything else sees it. `customization.disable_shield_ids_override` is in
`customization.py`."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union

from pydantic import Field, field_validator

from gateway.config.base import Strict

# What a blocked question is answered (LCORE's `DEFAULT_VIOLATION_MESSAGE`).
DEFAULT_VIOLATION_MESSAGE = "I cannot process this request due to policy restrictions."
# LCORE's question-validity prompt: `${message}` is the question, and the model answers
# `${allowed}` (ALLOWED) or `${rejected}` (REJECTED); anything but ALLOWED blocks.
DEFAULT_VALIDITY_PROMPT = """
Instructions:
- You are a question classifying tool
- You are an expert in kubernetes and openshift
- Your job is to determine where or a user's question is related to kubernetes and/or openshift technologies and to provide a one-word response.
- If a question appears to be related to kubernetes or openshift technologies, answer with the word ${allowed}, otherwise answer with the word ${rejected}.
- Do not explain your answer, just provide the one-word response. Do not give any other response.
- If the given question is an empty string, answer with the word ${rejected}


Example Question:
Why is the sky blue?
Example Response:
${rejected}

Example Question:
Why is the grass green?
Example Response:
${rejected}

Example Question:
Why is sand yellow?
Example Response:
${rejected}

Example Question:
Can you help configure my cluster to automatically scale?
Example Response:
${allowed}

Question:
${message}
Response:
"""


class QuestionValidityConfig(Strict):
    model_id: str | None = None      # None: the turn's own model
    model_prompt: str = DEFAULT_VALIDITY_PROMPT
    invalid_question_response: str = DEFAULT_VIOLATION_MESSAGE


class RedactionRule(Strict):
    pattern: str = Field(min_length=1)   # a Python regular expression
    replacement: str                      # may use \\1 for groups
    case_sensitive: bool | None = None    # None: the shield's `case_sensitive`

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        return value


class RedactionConfig(Strict):
    rules: list[RedactionRule] = []
    case_sensitive: bool = False


class QuestionValidityShield(Strict):
    name: str = Field(min_length=1)
    provider_id: Literal["question_validity"]
    config: QuestionValidityConfig = QuestionValidityConfig()


class RedactionShield(Strict):
    name: str = Field(min_length=1)
    provider_id: Literal["redaction"]
    config: RedactionConfig = RedactionConfig()


ShieldConfig = Annotated[Union[QuestionValidityShield, RedactionShield], Field(discriminator="provider_id")]
