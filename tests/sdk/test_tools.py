"""An agent's tools (gateway/sdk/tools.py): Python functions run in either kind of run,
the checks a tool definition passes when an agent is built (each failing with its
reason), and the definitions sent with every request."""

from __future__ import annotations

import pytest

from gateway.sdk import Agent, ToolDefinitionError, tool
from gateway.sdk.tools import build_toolset


def weather(city: str, days: int = 1) -> str:
    """Get the weather forecast.

    Args:
        city: The city to look up.
    """
    return city


async def test_async_and_sync_functions_run_in_both_kinds_of_run():
    async def aecho(text: str) -> str:
        """Echo."""
        return text

    def echo(text: str) -> dict:
        """Echo."""
        return {"text": text}

    for made in (tool(aecho), tool(echo)):
        values = made.schema.arguments.validate({"text": "hi"}, strict=True)
        assert await made.call_async(values) in ("hi", {"text": "hi"})
    assert tool(aecho).is_async and not tool(echo).is_async


def test_a_name_is_needed_for_a_lambda():
    with pytest.raises(ToolDefinitionError, match="tool name '<lambda>'.*name="):
        tool(lambda x: x)


def echo_weather(city: str) -> str:
    return city


def test_bad_definitions_fail_at_construction_with_the_reason():
    def untyped(x) -> None: ...
    def star(*args: int) -> None: ...
    def kw(**kwargs: int) -> None: ...
    def private(_x: int) -> None: ...

    client = type("C", (), {"responses": object()})()
    cases = [
        ([untyped], "parameter 'x': needs a type hint"),
        ([star], r"\*args and \*\*kwargs"),
        ([kw], r"\*args and \*\*kwargs"),
        ([private], "starting with '_'"),
        ([weather, weather], "two tools named 'weather'"),
        ([weather, tool(echo_weather, name="weather")], "two tools named"),
        ([{"type": "function", "name": "x"}], "a function tool is a Python function here"),
        ([{"type": "code_interpreter"}], "unknown server-side tool type 'code_interpreter'"),
        ([{"type": "mcp"}], "needs a server_label"),
        ([{"type": "mcp", "server_label": "a"}, {"type": "mcp", "server_label": "a"}], "server_label 'a'"),
        ([42], "a tool must be a function"),
    ]
    for tools, message in cases:
        with pytest.raises(ToolDefinitionError, match=message):
            Agent(client, tools=tools)
    with pytest.raises(ToolDefinitionError, match="must be a list"):
        build_toolset(weather)  # type: ignore[arg-type]


def test_definitions_sent_with_every_request():
    client = type("C", (), {"responses": object()})()
    renamed = tool(weather, name="forecast", description="Forecast.", strict=False)
    agent = Agent(client, tools=[renamed, {"type": "file_search", "vector_store_ids": ["vs_1"]}])
    function, search = agent.tool_definitions
    assert function["name"] == "forecast" and function["description"] == "Forecast."
    assert function["strict"] is False and function["type"] == "function"
    assert search == {"type": "file_search", "vector_store_ids": ["vs_1"]}
