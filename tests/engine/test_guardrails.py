"""Guardrails' pure parts (engine/guardrails.py): the request field, the input text,
the moderation verdicts and policy, and the output gate over a fake model."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import GuardrailsConfig
from gateway.engine.guardrails import Moderation, guarded, guardrail_ids, input_text, refusal_chunk
from gateway.engine.json_service import ServiceRefused, ServiceUnavailable
from gateway.schema.errors import ApiError


def test_guardrail_ids():
    assert guardrail_ids(None) == []
    assert guardrail_ids(["a", {"type": "b"}, "a"]) == ["a", "b"]
    for bad in (["", "a"], [{"type": "a", "x": 1}], [3], [{"id": "a"}]):
        with pytest.raises(ApiError) as raised:
            guardrail_ids(bad)
        assert raised.value.status == 422 and raised.value.param == "guardrails"


def test_input_text():
    items = [{"type": "message", "role": "user", "content": "one"},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "two"},
                                                            {"type": "input_image", "image_url": "x"}]},
             {"type": "function_call_output", "call_id": "c", "output": "three"},
             {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]
    assert input_text(items) == "one\ntwo\nthree"


class FakeService:
    def __init__(self, answer: Any):
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    async def post(self, body):
        self.bodies.append(body)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(body) if callable(self.answer) else self.answer


def moderation(answer: Any, **config: Any) -> Moderation:
    return Moderation(FakeService(answer), GuardrailsConfig(**config))  # type: ignore[arg-type]


async def test_verdicts():
    clean = {"results": [{"flagged": False, "categories": {"hate": False}}]}
    assert await moderation(clean).check(["g"], "hi") is None
    flagged = {"results": [{"flagged": True, "categories": {"hate": True, "violence": True, "sexual": False}}]}
    assert await moderation(flagged).check(["g"], "hi") == \
        "Content blocked by safety guardrails (flagged for: hate, violence)"
    own = {"results": [{"flagged": True, "user_message": "Not here.", "categories": {}}]}
    assert await moderation(own).check(["g"], "hi") == "Not here."
    checked = moderation(lambda body: flagged if body["model"] == "second" else clean)
    assert await checked.check(["first", "second"], "hi") is not None
    assert checked._service.bodies == [{"input": "hi", "model": "first"}, {"input": "hi", "model": "second"}]


@pytest.mark.parametrize("answer", [ServiceUnavailable("The moderation service could not be reached"),
                                    {"nothing": []}])
async def test_unavailable_fails_closed_or_open(answer):
    with pytest.raises(ApiError) as raised:
        await moderation(answer).check(["g"], "hi")
    assert raised.value.status == 503 and raised.value.code == "moderation_unavailable"
    assert await moderation(answer, fail_open=True).check(["g"], "hi") is None


async def test_a_refused_guardrail_is_the_requests_error_even_when_failing_open():
    with pytest.raises(ApiError) as raised:
        await moderation(ServiceRefused(404, "no such model"), fail_open=True).check(["g"], "hi")
    assert raised.value.status == 422 and "no such model" in raised.value.cause


# The output gate.

def text(piece: str) -> list[bytes]:
    return [b'"%s"' % piece.encode()]  # a text chunk as chat_stream.py hands it on


CALL = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}


class Reads:
    """A model whose stream is the given reads; it records being closed early."""

    def __init__(self, *reads: list[Any]):
        self.reads = reads
        self.closed_early = False

    async def __call__(self, chat):
        try:
            for read in self.reads:
                yield list(read)
        except GeneratorExit:
            self.closed_early = True
            raise


async def gate(model: Reads, flag: str | None = None, **config: Any):
    checks: list[str] = []

    def verdict(body):
        checks.append(body["input"])
        return {"results": [{"flagged": bool(flag and flag in body["input"]), "categories": {}}]}

    out = [read async for read in guarded(model, moderation(verdict, **config), ["g"])({})]
    return out, checks


async def test_released_per_sentence_after_its_check():
    out, checks = await gate(Reads([text("Hello ")], [text("there. ")], [text("Bye")], [USAGE]))
    assert out == [[text("Hello "), text("there. ")], [text("Bye"), USAGE]]
    assert checks == ["Hello there. ", "Hello there. Bye"]


async def test_chunks_without_text_pass_when_nothing_waits():
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    out, checks = await gate(Reads([role], [text("Hi.")]))
    assert out == [[role], [text("Hi.")]] and checks == ["Hi."]


async def test_a_window_of_characters():
    out, checks = await gate(Reads([text("abc. ")], [text("defgh")], [text("ij")]), output_window=6)
    assert checks == ["abc. defgh", "abc. defghij"] and out == [[text("abc. "), text("defgh")], [text("ij")]]


async def test_a_tool_call_holds_the_rest_of_the_round():
    out, checks = await gate(Reads([text("Let me look. ")], [CALL], [text("more. ")], [USAGE]))
    assert out == [[text("Let me look. ")], [CALL, text("more. "), USAGE]]
    assert checks == ["Let me look. ", "Let me look. more. "]


async def test_a_violation_mid_answer_closes_the_upstream_and_refuses():
    model = Reads([text("Fine. ")], [text("bad words. ")], [text("never read")])
    out, checks = await gate(model, flag="bad")
    assert out == [[text("Fine. ")], [refusal_chunk("Content blocked by safety guardrails")]]
    assert model.closed_early and checks == ["Fine. ", "Fine. bad words. "]


async def test_a_violation_at_the_end_keeps_the_usage():
    out, _ = await gate(Reads([text("so bad")], [{**USAGE, "id": "x"}]), flag="bad")
    assert out == [[refusal_chunk("Content blocked by safety guardrails"), USAGE]]


async def test_a_sentence_end_split_across_pieces():
    out, checks = await gate(Reads([text("Hi.")], [text(" Next")], [text(" one")]))
    assert checks == ["Hi. Next", "Hi. Next one"] and out == [[text("Hi."), text(" Next")], [text(" one")]]
