"""A scripted model and tool executors for the loop's unit tests (no sockets)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, AsyncIterator

from gateway.engine.emitter import Emitter
from gateway.engine.response import new_response
from gateway.engine.executor import ToolCall, ToolResult
from gateway.engine.plan import Plan


def text_round(text: str, finish: str = "stop", usage: tuple[int, int] = (3, 2)) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    chunks += [{"choices": [{"index": 0, "delta": {"content": word}}]} for word in text.split(" ")]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    return chunks


def calls_round(*calls: tuple[str | None, str, str], usage: tuple[int, int] = (4, 1)) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        start: dict[str, Any] = {"index": index, "type": "function", "function": {"name": name, "arguments": ""}}
        if call_id is not None:
            start["id"] = call_id
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [start]}}]})
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "function": {"arguments": arguments}}]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
    return chunks


class FakeModel:
    """Plays one scripted round per chat request and keeps the requests it got."""

    def __init__(self, *rounds: list[dict[str, Any]]):
        self.rounds = list(rounds)
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, request: dict[str, Any]) -> AsyncIterator[list[dict[str, Any]]]:
        self.requests.append(copy.deepcopy(request))
        chunks = self.rounds.pop(0)
        for chunk in chunks:
            await asyncio.sleep(0)
            yield [chunk]


class Executor:
    """Runs tools whose names it was given; `barrier` makes every call wait until
    `parties` calls are running at once (proves concurrency without timing)."""

    def __init__(self, names: set[str], results: dict[str, Any] | None = None, parties: int = 0):
        self.names = names
        self.results = results or {}
        self.calls: list[ToolCall] = []
        self.barrier = asyncio.Barrier(parties) if parties else None
        self.cancelled = 0
        self.started = asyncio.Event()

    def can_execute(self, tool: dict[str, Any]) -> bool:
        return tool.get("name") in self.names

    async def execute(self, call: ToolCall) -> ToolResult:
        self.calls.append(call)
        self.started.set()
        try:
            if self.barrier is not None:
                await self.barrier.wait()
            result = self.results.get(call.name, f"ran {call.name}")
            if result == "hang":
                await asyncio.Event().wait()
            if isinstance(result, Exception):
                raise result
            return ToolResult(result)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


def plan(*tool_names: str, **overrides: Any) -> Plan:
    tools = {name: {"type": "function", "name": name, "parameters": {"type": "object"}} for name in tool_names}
    values: dict[str, Any] = {"chat": {"model": "m", "stream": True}, "messages": [{"role": "user", "content": "go"}],
                              "tools": tools, "tool_choice": "auto" if tools else None}
    values.update(overrides)
    return Plan(**values)


def emitter() -> Emitter:
    return Emitter(new_response("resp_test", "m", {}, None, []))


class Saves:
    def __init__(self) -> None:
        self.states: list[tuple[str, int, bool]] = []

    async def __call__(self, emitter: Emitter, finished: bool) -> None:
        self.states.append((emitter.response["status"], len(emitter.output), finished))
