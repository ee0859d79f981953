"""The agent's loop through `gateway serve` in both upstream modes (see conftest.py):
function calls run on the client and chained back, concurrently; errors and invalid
arguments shown to the model; max_turns; store=false; conversation chaining."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated

import pytest
from pydantic import Field

from gateway.sdk import Agent, AgentStateError
from tests.sdk.conftest import async_client, sync_client


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def outputs(result) -> dict[str, str]:
    return {item["call_id"]: item["output"] for item in result.items if item["type"] == "function_call_output"}


def calls(result) -> list[dict]:
    return [item for item in result.items if item["type"] == "function_call"]


def test_two_tool_task(gw):
    agent = Agent(sync_client(gw), tools=[add, mul])
    result = agent.run("parallel-calls: use the add and mul tools with 2 and 3")
    assert sorted((c["name"], c["arguments"].replace(" ", "")) for c in calls(result)) == [
        ("add", '{"a":2,"b":3}'), ("mul", '{"a":2,"b":3}')]
    by_name = {c["name"]: outputs(result)[c["call_id"]] for c in calls(result)}
    assert by_name == {"add": "5", "mul": "6"}
    assert result.status == "completed"
    assert result.output_text == f"Tool said: {outputs(result)[calls(result)[-1]['call_id']]}"
    # Usage is the sum over the run's two model calls.
    assert result.usage.requests == 2
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.usage.total_tokens == result.usage.input_tokens + result.usage.output_tokens
    assert agent.previous_response_id == result.response_id and agent.conversation.startswith("conv_")
    # The history continues: the next run is turn 2 of the same conversation.
    again = agent.run("And now?")
    assert again.output_text.startswith("Scripted reply (turn 2,")
    assert again.conversation == result.conversation


def test_calls_of_one_turn_run_concurrently_sync(gw):
    barrier = threading.Barrier(2, timeout=10)  # a deadlock unless both run at once

    def left(a: int, b: int) -> str:
        barrier.wait()
        return "left"

    def right(a: int, b: int) -> str:
        barrier.wait()
        return "right"

    result = Agent(sync_client(gw), tools=[left, right]).run("parallel-calls: use the left and right tools")
    assert sorted(outputs(result).values()) == ["left", "right"]


def test_async_tools_in_a_sync_run_run_concurrently(gw):
    barrier = threading.Barrier(2, timeout=10)  # each call has a thread and an event loop of its own

    async def left(a: int, b: int) -> str:
        barrier.wait()
        return "left"

    async def right(a: int, b: int) -> str:
        barrier.wait()
        return "right"

    result = Agent(sync_client(gw), tools=[left, right]).run("parallel-calls: use the left and right tools")
    assert sorted(outputs(result).values()) == ["left", "right"]


async def test_calls_of_one_turn_run_concurrently_async(gw):
    barrier = asyncio.Barrier(2)

    async def left(a: int, b: int) -> str:
        await asyncio.wait_for(barrier.wait(), 10)
        return "left"

    thread_barrier = threading.Barrier(2, timeout=10)

    async def right(a: int, b: int) -> str:
        await asyncio.wait_for(barrier.wait(), 10)
        return "right"

    def blocking(a: int, b: int) -> str:  # a sync tool in an async run: off the loop
        thread_barrier.wait()
        return "blocking"

    def other(a: int, b: int) -> str:
        thread_barrier.wait()
        return "other"

    agent = Agent(async_client(gw), tools=[left, right])
    result = await agent.arun("parallel-calls: use the left and right tools")
    assert sorted(outputs(result).values()) == ["left", "right"]
    result = await Agent(async_client(gw), tools=[blocking, other]).arun("parallel-calls: use the tools")
    assert sorted(outputs(result).values()) == ["blocking", "other"]


def test_a_tool_that_raises_is_an_error_the_model_sees(gw):
    def explode(text: str) -> str:
        raise RuntimeError("the fuse was lit")

    events = list(Agent(sync_client(gw), tools=[explode]).stream("Use the explode tool"))
    [tool_result] = [e for e in events if e.type == "tool_result"]
    assert tool_result.is_error
    assert tool_result.output == "Error: explode raised RuntimeError: the fuse was lit"
    result = events[-1].result
    assert result.output_text == "Tool said: Error: explode raised RuntimeError: the fuse was lit"


def test_invalid_arguments_are_an_error_the_model_sees(gw):
    ran = []

    def check(n: Annotated[int, Field(ge=100)]) -> str:
        """Check a number of at least 100."""
        ran.append(n)
        return "fine"

    result = Agent(sync_client(gw), tools=[check]).run("Use the check tool with 5")
    [output] = outputs(result).values()
    assert output == "Error: check was not called: invalid arguments: n: Input should be greater than or equal to 100"
    assert ran == []
    assert result.output_text == f"Tool said: {output}"


def test_max_turns_stops_a_model_that_keeps_calling(gw):
    ran = []

    def echo_text(text: str) -> str:
        ran.append(text)
        return "again"

    agent = Agent(sync_client(gw), tools=[echo_text], max_turns=3)
    result = agent.run("loop-tools use the echo_text tool")
    assert result.status == "max_turns" and result.output_text == ""
    assert result.usage.requests == 3
    assert len(ran) == 2  # the third call waits, unanswered, in the agent's state
    assert len(calls(result)) == 3
    with pytest.raises(AgentStateError, match="resume"):
        agent.run("something else")
    resumed = agent.resume()
    assert resumed.status == "max_turns" and len(ran) == 5


def test_store_false_sends_the_whole_history(gw, peer, mode):
    agent = Agent(sync_client(gw), tools=[add], store=False)
    first = agent.run("Use the add tool with 2 and 3")
    assert first.output_text == "Tool said: 5"
    peer.clear()
    second = agent.run("Thanks")
    assert second.output_text == "Scripted reply (turn 2, 5 messages): Thanks"
    assert agent.previous_response_id is None
    if mode == "forward":
        sent = peer.last()["body"]
        assert sent["store"] is False and "previous_response_id" not in sent
        assert [item["type"] for item in sent["input"]] == [
            "message", "function_call", "function_call_output", "message", "message"]
    else:
        messages = peer.last("/v1/chat/completions")["body"]["messages"]
        assert [m["role"] for m in messages if m["role"] != "system"] == [
            "user", "assistant", "tool", "assistant", "user"]


def test_chained_by_the_gateways_conversation(gw, peer):
    agent = Agent(sync_client(gw), chain="conversation")
    first = agent.run("one")
    second = agent.run("two")
    assert second.conversation == first.conversation == agent.conversation
    assert second.output_text == "Scripted reply (turn 2, 3 messages): two"
