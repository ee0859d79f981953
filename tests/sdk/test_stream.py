"""Streamed runs (sync and async) through `gateway serve` in both modes: typed events as
they happen, the text deltas adding up to the final text."""

from __future__ import annotations

from gateway.sdk import (Agent, ResultEvent, TextDeltaEvent, ToolCallEvent, ToolResultEvent)
from tests.sdk.conftest import async_client, sync_client


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def aadd(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def check(events, name: str) -> None:
    types = [event.type for event in events]
    assert types[0] == "tool_call" and types[1] == "tool_result" and types[-1] == "result"
    assert set(types[2:-1]) == {"text_delta"}
    call, output = events[0], events[1]
    assert isinstance(call, ToolCallEvent) and call.name == name and call.arguments.replace(" ", "") == '{"a":2,"b":3}'
    assert isinstance(output, ToolResultEvent) and output.call_id == call.call_id and output.output == "5"
    assert not output.is_error
    result = events[-1]
    assert isinstance(result, ResultEvent)
    text = "".join(event.delta for event in events if isinstance(event, TextDeltaEvent))
    assert text == result.result.output_text == "Tool said: 5"
    assert len([e for e in events if e.type == "text_delta"]) > 1  # deltas, not one block


def test_stream_sync(gw):
    agent = Agent(sync_client(gw), tools=[add])
    check(list(agent.stream("Use the add tool with 2 and 3")), "add")
    assert agent.run("next").output_text.startswith("Scripted reply (turn 2,")


async def test_stream_async(gw):
    agent = Agent(async_client(gw), tools=[aadd])
    check([event async for event in agent.astream("Use the aadd tool with 2 and 3")], "aadd")
    assert (await agent.arun("next")).output_text.startswith("Scripted reply (turn 2,")


def test_a_stream_left_early_frees_the_agent(gw):
    agent = Agent(sync_client(gw))
    events = agent.stream("Hello there")
    assert next(events).type == "text_delta"
    events.close()
    assert agent.run("again").output_text.startswith("Scripted reply (turn 1,")  # the first never committed
