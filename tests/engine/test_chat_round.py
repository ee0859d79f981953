"""One Chat Completions stream's chunks into the emitter: reasoning, text, refusals and
tool-call pieces keyed by index; a unique call id for each call; the finish reason and
the usage that comes after it; an error inside the stream raised. (With the real
emitter, through the loop: test_loop.py.)"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.engine import translate
from gateway.engine.chat_round import ChatRound, UpstreamChatError
from tests.engine import fakes
from tests.support.openai_shapes import validate_event


class Emitter:
    """Records what the round asks of the emitter."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []
        self.calls: set[int] = set()

    def __getattr__(self, name: str):
        return lambda *args: self.seen.append((name, *args))

    def has_call(self, index: int) -> bool:
        return index in self.calls

    def call_started(self, index: int, call_id: str, name: str) -> None:
        self.calls.add(index)
        self.seen.append(("call_started", index, call_id, name))


def delta(finish: str | None = None, **fields) -> dict:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def fed(*chunks, seen_ids: set[str] | None = None) -> tuple[ChatRound, Emitter]:
    emitter = Emitter()
    round_ = ChatRound(emitter, seen_ids if seen_ids is not None else set())   # type: ignore[arg-type]
    for chunk in chunks:
        round_.feed(chunk)
    return round_, emitter


def test_reasoning_text_and_refusal_in_order():
    round_, emitter = fed(delta(reasoning_content="think"), delta(reasoning="more"), delta(content="Hi"),
                          delta(refusal="no"), ['"a"', '"b"'])
    assert emitter.seen == [("reasoning", "think"), ("reasoning", "more"), ("text", "Hi"), ("refusal", "no"),
                            ("text_literals", ['"a"', '"b"'])]
    assert round_.finish_reason is None and round_.usage is None


def test_tool_call_pieces_are_keyed_by_index():
    _, emitter = fed(
        delta(tool_calls=[{"index": 0, "id": "call_a", "function": {"name": "add", "arguments": '{"a":'}}]),
        delta(tool_calls=[{"index": 1, "id": "call_b", "function": {"name": "mul"}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": "2}"}}]),
    )
    assert emitter.seen == [("call_started", 0, "call_a", "add"), ("call_arguments", 0, '{"a":'),
                            ("call_started", 1, "call_b", "mul"), ("call_arguments", 0, "2}")]


def test_a_call_without_an_id_or_with_a_used_one_gets_a_new_one():
    seen_ids = {"call_used"}
    _, emitter = fed(delta(tool_calls=[{"index": 0, "id": "call_used", "function": {"name": "f"}},
                                       {"index": 1, "function": {"name": "g"}}]), seen_ids=seen_ids)
    ids = [event[2] for event in emitter.seen if event[0] == "call_started"]
    assert all(call_id.startswith("call_") and call_id != "call_used" for call_id in ids)
    assert len(set(ids)) == 2 and set(ids) < seen_ids   # remembered for the response's next rounds


def test_the_round_keeps_the_finish_reason_and_the_usage_after_it():
    round_, _ = fed(delta("tool_calls"), {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2,
                                                                   "total_tokens": 7}})
    assert round_.finish_reason == "tool_calls"
    assert round_.usage is not None and round_.usage["input_tokens"] == 5 and round_.usage["output_tokens"] == 2


def test_other_choices_are_ignored_and_an_error_chunk_raises():
    _, emitter = fed({"choices": [{"index": 1, "delta": {"content": "other"}}, "junk"]})
    assert emitter.seen == []
    with pytest.raises(UpstreamChatError, match="overloaded"):
        fed({"error": {"message": "overloaded"}})
    with pytest.raises(UpstreamChatError, match="the upstream reported an error"):
        fed({"error": {}})


# -- properties (issue 42: fuzzing in CI, bounded and derandomized) ----------------------

_TEXT = st.text(max_size=10)
_CALL = st.fixed_dictionaries({"index": st.integers(0, 2)}, optional={
    "id": st.none() | st.sampled_from(["call_1", "call_2", ""]), "type": st.just("function"),
    "function": st.fixed_dictionaries({}, optional={"name": st.none() | _TEXT, "arguments": st.none() | _TEXT})})
_DELTA = st.fixed_dictionaries({}, optional={
    "role": st.none() | st.just("assistant"), "content": st.none() | _TEXT, "refusal": st.none() | _TEXT,
    "reasoning_content": st.none() | _TEXT, "tool_calls": st.none() | st.lists(_CALL, max_size=2)})
_USAGE = st.fixed_dictionaries({"prompt_tokens": st.integers(0, 10**6), "completion_tokens": st.integers(0, 10**6),
                                "total_tokens": st.integers(0, 2 * 10**6)})
# A chunk as OpenAI's `ChatCompletionChunk` declares it (the fields the round reads), or
# the text pieces chat_stream.py hands on as JSON literals.
_CHUNK = st.fixed_dictionaries({"choices": st.lists(st.fixed_dictionaries({
    "index": st.integers(0, 1), "delta": _DELTA,
    "finish_reason": st.none() | st.sampled_from(["stop", "length", "tool_calls", "content_filter"])}), max_size=2)},
    optional={"usage": st.none() | _USAGE, "id": _TEXT, "object": st.just("chat.completion.chunk")}) | st.lists(
    _TEXT.map(lambda text: orjson.dumps(text)), min_size=1, max_size=3)


@settings(max_examples=100, derandomize=True, deadline=None, database=None)
@given(chunks=st.lists(_CHUNK, max_size=8), finish=st.sampled_from(["completed", "incomplete", "failed"]))
def test_any_valid_chunks_become_a_response_the_openai_types_accept(chunks, finish):
    """Chunks of any valid shape, in any order, go through the real emitter into events
    and a final response object that `openai`'s types accept."""
    emitter = fakes.emitter()
    round_ = ChatRound(emitter, set())
    for chunk in chunks:
        round_.feed(chunk)
    if finish == "failed":
        terminal = emitter.fail("the upstream stopped")
    else:
        terminal = emitter.finish(finish, round_.usage, translate.incomplete_reason(round_.finish_reason))
    for event in [*emitter.take(), terminal]:
        validate_event(event.data)
