"""Guardrails on the agent's state, through `gateway serve` in both modes: a failed
model call changes nothing, one run at a time, the server's `incomplete` and `failed`,
the client kind each method needs."""

from __future__ import annotations

import openai
import pytest

from gateway.sdk import Agent, AgentStateError, ResponseFailedError
from tests.sdk.conftest import async_client, sync_client


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_a_failed_call_leaves_the_state_as_it_was(gw, mode):
    agent = Agent(sync_client(gw), tools=[add])
    assert agent.run("Use the add tool with 2 and 3").output_text == "Tool said: 5"
    before = agent.snapshot()
    with pytest.raises(openai.APIStatusError):
        agent.run("fail-upstream now")
    assert agent.snapshot() == before
    # A stream fails as `response.failed` (forward) or before its first byte (engine).
    expected = ResponseFailedError if mode == "forward" else openai.APIStatusError
    with pytest.raises(expected, match="scripted upstream failure"):
        list(agent.stream("fail-upstream now"))
    assert agent.snapshot() == before
    # The conversation goes on where it was: turn 2, the failures left no trace.
    assert agent.run("again").output_text.startswith("Scripted reply (turn 2, 5 messages)")


def test_incomplete_is_a_status(gw):
    result = Agent(sync_client(gw)).run("finish-length please")
    assert result.status == "incomplete" and result.output_text


def test_one_run_at_a_time(gw):
    agent = Agent(sync_client(gw))
    events = agent.stream("Hello there")
    next(events)
    with pytest.raises(AgentStateError, match="already running"):
        agent.run("meanwhile")
    with pytest.raises(AgentStateError, match="while it runs"):
        agent.snapshot()
    assert list(events)[-1].type == "result"
    assert agent.run("after").output_text.startswith("Scripted reply (turn 2,")


async def test_each_method_needs_its_client(gw):
    with pytest.raises(TypeError, match="use arun"):
        Agent(async_client(gw)).run("x")
    with pytest.raises(TypeError, match="use run"):
        await Agent(sync_client(gw)).arun("x")
