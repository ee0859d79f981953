"""LCORE's shields, run by the gateway: which apply to a turn (`shield_ids`), the
`redaction` shields' rewriting of its input, and `GET /v1/shields`'s body.

A request's `shield_ids` picks shields by name (null: every configured shield); an
unknown name is a 404, and naming any where the operator set
`customization.disable_shield_ids_override` is LCORE's 422. Redaction runs in
`prepare()` right after the request is validated, in the one step that normalises the
input (`turns/normalized.py`) before anything else reads it: the upstream, the turn
store, transcripts, topic summaries and the question-validity shields see only the
rewritten text (compaction summaries and items taken from the conversation included).
`question_validity` shields judge the (redacted) question with one model call each, on
the gateway's account (the backend's `summarize`, charged to no one): an answer other
than `ALLOWED` blocks the turn (`turns/blocked.py`).
"""

from __future__ import annotations

import re
from functools import partial
from string import Template
from typing import Any, Awaitable, Callable, Sequence, TypedDict

from gateway.config import Configuration, QuestionValidityShield, RedactionShield
from gateway.schema.errors import ApiError

ALLOWED, REJECTED = "ALLOWED", "REJECTED"
# One call: (model, instructions, text) -> the model's answer (`Backend.summarize`).
Ask = Callable[[str, str, str], Awaitable[str]]


def shield_ids_disabled() -> ApiError:
    """LCORE's 422 where the operator disabled request shield ids."""
    return ApiError(422, "Shield IDs customization is disabled",
                    "This instance does not support customizing shield IDs in the query request "
                    "(disable_shield_ids_override is set). Please remove the shield_ids field from your request.",
                    code="shield_ids_disabled", param="shield_ids")


def shields_not_found(names: Sequence[str]) -> ApiError:
    return ApiError(404, "Shield(s) not found", f"Shield(s) with ID(s) {', '.join(names)} do not exist",
                    code="shield_not_found", param="shield_ids")


class _Redactor:
    """One redaction shield's rules, compiled once."""

    def __init__(self, shield: RedactionShield):
        default = shield.config.case_sensitive
        self.rules = [(re.compile(rule.pattern, 0 if (rule.case_sensitive if rule.case_sensitive is not None
                                                       else default) else re.IGNORECASE), rule.replacement)
                      for rule in shield.config.rules]

    def text(self, value: str) -> str:
        for pattern, replacement in self.rules:
            value = pattern.sub(replacement, value)
        return value


class ShieldEntry(TypedDict):
    """One shield of `GET /v1/shields` (`config`: its configuration as dumped)."""
    name: str
    provider_id: str | None
    type: str
    config: dict[str, Any]


class ShieldList(TypedDict):
    """`GET /v1/shields`'s body."""
    shields: list[ShieldEntry]


class Shields:
    def __init__(self, config: Configuration):
        self._shields = {shield.name: shield for shield in config.shields}
        self._override_disabled = config.customization.disable_shield_ids_override
        self._redactors = {shield.name: _Redactor(shield) for shield in config.shields
                           if isinstance(shield, RedactionShield)}

    def select(self, shield_ids: list[str] | None) -> list[str]:
        """The names of the shields a request runs (its `shield_ids`, else all), or
        LCORE's 422 / the 404 naming the unknown ones."""
        if shield_ids is None:
            return list(self._shields)
        if self._override_disabled:
            raise shield_ids_disabled()
        unknown = [name for name in shield_ids if name not in self._shields]
        if unknown:
            raise shields_not_found(unknown)
        return list(dict.fromkeys(shield_ids))

    def redaction(self, names: Sequence[str]) -> Callable[[Any], Any]:
        """The selected redaction shields over an input (`turns/normalized.py`): a new
        input with every user text rewritten, or the input itself without any."""
        redactors = [self._redactors[name] for name in names if name in self._redactors]
        return partial(_rewrite, redactors=redactors) if redactors else _unchanged

    def listing(self) -> ShieldList:
        """`GET /v1/shields`: LCORE's `{"shields": [{name, provider_id, type, config}]}`."""
        return {"shields": [{"name": shield.name, "provider_id": shield.provider_id, "type": "shield",
                             "config": shield.config.model_dump()} for shield in self._shields.values()]}

    async def judge(self, names: Sequence[str], question: str, model: str, ask: Ask) -> str | None:
        """The selected `question_validity` shields in order: the first one whose model
        does not answer `ALLOWED` blocks, and its message is returned (None: allowed)."""
        for name in names:
            shield = self._shields[name]
            if not isinstance(shield, QuestionValidityShield):
                continue
            prompt = Template(shield.config.model_prompt).safe_substitute(allowed=ALLOWED, rejected=REJECTED,
                                                                         message=question)
            answer = await ask(shield.config.model_id or model, "", prompt)
            if answer.strip() != ALLOWED:
                return shield.config.invalid_question_response
        return None


def _unchanged(value: Any) -> Any:
    return value


def _rewrite(value: Any, redactors: Sequence[_Redactor]) -> Any:
    """The input with every text a user wrote rewritten: a string input, a message's
    string content, and `input_text` parts (other items, tool outputs among them, are
    left as they are)."""
    def text(value: str) -> str:
        for redactor in redactors:
            value = redactor.text(value)
        return value

    if isinstance(value, str):
        return text(value)
    if not isinstance(value, list):
        return value
    items = []
    for item in value:
        if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                item = {**item, "content": text(content)}
            elif isinstance(content, list):
                item = {**item, "content": [
                    {**part, "text": text(part["text"])} if isinstance(part, dict) and part.get("type") == "input_text"
                    and isinstance(part.get("text"), str) else part for part in content]}
        items.append(item)
    return items
