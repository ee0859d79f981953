"""The I/O of the loop: the sync driver over `OpenAI`, the async one over `AsyncOpenAI`.

Each driver steps `loop.run_loop` and answers its effects: model calls (streamed when the
caller streams, so text deltas reach it as they arrive), function calls (all of a turn's
at once: threads for the sync agent, tasks for the async one; results reported as each
finishes) and approval callbacks. Every driver is a generator of events ending with the
`ResultEvent`; `run`/`arun` just keep the last one.
"""

from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, AsyncIterator, Callable, Generator, Iterator

from .errors import ResponseFailedError
from .loop import AskApprovals, CallModel, Emit, Loop, Outcome, Prepared, RunCalls
from .results import (ApprovalRequest, ApprovalRequestEvent, Event, ResultEvent,
                      TextDeltaEvent, ToolResultEvent)
from .tools import output_text

Approver = Callable[[ApprovalRequest], Any]


def _as_dict(obj: Any) -> dict[str, Any]:
    # to_dict keeps what the server sent (warnings off: the gateway's `conversation` is a
    # string where the openai types expect an object), extensions included.
    return obj.to_dict(mode="json", warnings=False) if hasattr(obj, "to_dict") else dict(obj)


def _failed(exc: BaseException, call: Prepared) -> Outcome:
    return Outcome(f"Error: {call.name} raised {type(exc).__name__}: {exc}", True)


def _terminal(event: Any) -> dict[str, Any] | None:
    kind = getattr(event, "type", None)
    if kind in ("response.completed", "response.incomplete", "response.failed"):
        return _as_dict(event.response)
    if kind == "error":
        raise ResponseFailedError(f"the stream ended with an error: {getattr(event, 'message', '')}")
    return None


def _delta(event: Any) -> TextDeltaEvent | None:
    if getattr(event, "type", None) == "response.output_text.delta":
        return TextDeltaEvent(event.delta, getattr(event, "item_id", None))
    return None


def drive_sync(loop: Loop, client: Any, stream: bool, approver: Approver | None) -> Iterator[Event]:
    answer: Any = None
    while True:
        try:
            effect = loop.send(answer)
        except StopIteration as stop:
            yield ResultEvent(stop.value)
            return
        answer = None
        if isinstance(effect, Emit):
            yield effect.event
        elif isinstance(effect, CallModel):
            if stream:
                answer = yield from _stream_sync(client, effect)
            else:
                answer = _as_dict(client.responses.create(**effect.body, extra_headers=effect.headers))
        elif isinstance(effect, RunCalls):
            answer = yield from _calls_sync(effect.calls)
        elif isinstance(effect, AskApprovals):
            answer = {}
            for request in effect.requests:
                verdict = approver(request) if approver else False
                if inspect.isawaitable(verdict):
                    verdict = asyncio.run(_awaited(verdict))
                answer[request.id] = bool(verdict)
                yield ApprovalRequestEvent(request, answer[request.id])


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _stream_sync(client: Any, effect: CallModel) -> Generator[Event, None, dict[str, Any]]:
    final = None
    with client.responses.create(**effect.body, stream=True, extra_headers=effect.headers) as events:
        for event in events:
            delta = _delta(event)
            if delta is not None:
                yield delta
            final = _terminal(event) or final
    if final is None:
        raise ResponseFailedError("the stream ended without a terminal event")
    return final


def _calls_sync(calls: list[Prepared]) -> Generator[Event, None, list[Outcome]]:
    outcomes: dict[int, Outcome] = {}
    runnable = [i for i, call in enumerate(calls) if call.tool is not None]
    for i, call in enumerate(calls):
        if call.tool is None:
            outcomes[i] = Outcome(call.error or "Error", True)
            yield ToolResultEvent(call.call_id, call.name, outcomes[i].output, True)
    if runnable:
        # One thread per call: a turn's calls run at the same time, as the model asked.
        with ThreadPoolExecutor(max_workers=len(runnable), thread_name_prefix="agent-tool") as pool:
            futures = {pool.submit(_call_sync, calls[i]): i for i in runnable}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    outcomes[i] = Outcome(output_text(future.result()), False)
                except Exception as exc:  # the model sees what went wrong, the run goes on
                    outcomes[i] = _failed(exc, calls[i])
                yield ToolResultEvent(calls[i].call_id, calls[i].name, outcomes[i].output,
                                      outcomes[i].is_error)
    return [outcomes[i] for i in range(len(calls))]


def _call_sync(call: Prepared) -> Any:
    assert call.tool is not None and call.values is not None  # runnable: prepared without error
    return call.tool.call_sync(call.values)


async def drive_async(loop: Loop, client: Any, stream: bool,
                      approver: Approver | None) -> AsyncIterator[Event]:
    answer: Any = None
    while True:
        try:
            effect = loop.send(answer)
        except StopIteration as stop:
            yield ResultEvent(stop.value)
            return
        answer = None
        if isinstance(effect, Emit):
            yield effect.event
        elif isinstance(effect, CallModel):
            if stream:
                holder: list[dict[str, Any]] = []
                async for event in _stream_async(client, effect, holder):
                    yield event
                answer = holder[0]
            else:
                response = await client.responses.create(**effect.body, extra_headers=effect.headers)
                answer = _as_dict(response)
        elif isinstance(effect, RunCalls):
            outcomes: list[Outcome] = []
            async for event in _calls_async(effect.calls, outcomes):
                yield event
            answer = outcomes
        elif isinstance(effect, AskApprovals):
            answer = {}
            for request in effect.requests:
                answer[request.id] = await _ask(approver, request)
                yield ApprovalRequestEvent(request, answer[request.id])


async def _ask(approver: Approver | None, request: ApprovalRequest) -> bool:
    if approver is None:
        return False
    if inspect.iscoroutinefunction(approver):
        return bool(await approver(request))
    # A sync callback may block (a prompt to a person): not on the event loop.
    verdict = await asyncio.to_thread(approver, request)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)


async def _stream_async(client: Any, effect: CallModel,
                        holder: list[dict[str, Any]]) -> AsyncIterator[Event]:
    final = None
    events = await client.responses.create(**effect.body, stream=True, extra_headers=effect.headers)
    async with events:
        async for event in events:
            delta = _delta(event)
            if delta is not None:
                yield delta
            final = _terminal(event) or final
    if final is None:
        raise ResponseFailedError("the stream ended without a terminal event")
    holder.append(final)


async def _calls_async(calls: list[Prepared], outcomes: list[Outcome]) -> AsyncIterator[Event]:
    results: dict[int, Outcome] = {}
    for i, call in enumerate(calls):
        if call.tool is None:
            results[i] = Outcome(call.error or "Error", True)
            yield ToolResultEvent(call.call_id, call.name, results[i].output, True)

    async def one(i: int) -> int:
        call = calls[i]
        assert call.tool is not None and call.values is not None
        try:
            results[i] = Outcome(output_text(await call.tool.call_async(call.values)), False)
        except Exception as exc:  # the model sees what went wrong, the run goes on
            results[i] = _failed(exc, call)
        return i

    tasks = [asyncio.ensure_future(one(i)) for i, call in enumerate(calls) if call.tool is not None]
    try:
        for finished in asyncio.as_completed(tasks):
            i = await finished
            yield ToolResultEvent(calls[i].call_id, calls[i].name, results[i].output, results[i].is_error)
    finally:
        for task in tasks:  # a caller that stops listening stops the calls too
            task.cancel()
    outcomes.extend(results[i] for i in range(len(calls)))
