"""Topic summaries (`turns/summary.py`): made beside a turn that starts a stored
conversation, through the turn's backend, committed with its record, never charged;
none for a continued conversation, a `store: false` turn or `generate_topic_summary:
false`; a failed one loses nothing; an abandoned turn cancels it."""

from __future__ import annotations

import asyncio

import pytest

from gateway.config.customization import DEFAULT_TOPIC_SUMMARY_PROMPT
from gateway.schema.errors import ApiError
from tests.turns.test_life import MODEL, Body, Frames, life, store  # noqa: F401 (fixture)


async def _run(turns, **raw):
    turn = await turns.prepare(**raw)
    sink = Body()
    await turns.runner.run(turn, sink)
    await turns.settler.drain()
    return turn, sink.responses[0]


async def test_a_new_conversation_gets_its_summary_with_its_record_uncharged(store):  # noqa: F811
    turns = life(store)
    turn, body = await _run(turns, input=[{"role": "system", "content": "ignored"},
                                          {"role": "user", "content": [{"type": "input_text", "text": "How do"},
                                                                       {"type": "input_text", "text": "pods scale?"}]}])
    assert turns.backend.summaries == [(MODEL.id, DEFAULT_TOPIC_SUMMARY_PROMPT, "How do pods scale?")]
    conversation = await turns.repository.get(turn.plan.conversation_id)
    assert conversation is not None and conversation.topic_summary == "Fake Topic Title"
    assert turns.quota.written == [(MODEL.id, 42)]        # the turn's usage only
    # The next turn continues the conversation: no summary, and the first one stays.
    first = turns.backend.respond

    async def second(turn):
        return {**await first(turn), "id": "resp_2"}
    turns.backend.respond = second
    await _run(turns, conversation=body["conversation"])
    assert len(turns.backend.summaries) == 1
    assert (await turns.repository.get(turn.plan.conversation_id)).topic_summary == "Fake Topic Title"


@pytest.mark.parametrize("raw, customization", [
    ({"generate_topic_summary": False}, None),
    ({"store": False}, None),
    ({}, {"topic_summaries": False}),
])
async def test_none_asked(store, raw, customization):  # noqa: F811
    turns = life(store, customization=customization)
    await _run(turns, **raw)
    assert turns.backend.summaries == []


async def test_the_configured_prompt(store):  # noqa: F811
    turns = life(store, customization={"topic_summary_prompt": "Title it."})
    await _run(turns, input="hello there")
    assert turns.backend.summaries == [(MODEL.id, "Title it.", "hello there")]


@pytest.mark.parametrize("failure", [ApiError(500, "Internal server error", "boom", code="upstream_error"),
                                     RuntimeError("anything")])
async def test_a_failed_summary_loses_nothing(store, failure, caplog):  # noqa: F811
    turns = life(store)
    turns.backend.summary = failure
    turn, body = await _run(turns)
    assert body["status"] == "completed"
    conversation = await turns.repository.get(turn.plan.conversation_id)
    assert conversation is not None and conversation.topic_summary == "" and conversation.message_count == 1
    assert await turns.repository.find_turn("resp_1") is not None
    assert "recorded without one" in caplog.text


async def test_the_record_waits_for_a_summary_still_being_made(store):  # noqa: F811
    turns = life(store)
    turns.backend.summary_gate = asyncio.Event()
    turn = await turns.prepare()
    sink = Body()
    running = asyncio.ensure_future(turns.runner.run(turn, sink))
    await turns.backend.summary_started.wait()
    await asyncio.sleep(0.05)
    assert not running.done() and sink.responses == []   # settling waits for it
    turns.backend.summary_gate.set()
    await running
    assert (await turns.repository.get(turn.plan.conversation_id)).topic_summary == "Fake Topic Title"


async def test_an_abandoned_turn_cancels_its_summary(store):  # noqa: F811
    turns = life(store, stall=True)
    turns.backend.summary_gate = asyncio.Event()   # never set
    turn = await turns.prepare(stream=True)
    sink = Frames(turns, turn)
    running = asyncio.ensure_future(turns.runner.run(turn, sink))
    while "start" not in sink.calls:
        await asyncio.sleep(0.001)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await turns.settler.drain()
    await asyncio.sleep(0)
    assert turn.summary is not None and turn.summary.cancelled()
