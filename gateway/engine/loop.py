"""The agentic loop (spec 002), written against a model (an async iterator of chat
chunks for a chat request) and tool executors, so it runs the same over the real
upstream and over fakes in tests.

Per round: one chat request, its stream read into the emitter; then
- `finish_reason: length` / `content_filter` → `incomplete` with that reason;
- no tool calls, or `tool_choice: none` → `completed`;
- any call of a client-side tool (a function tool: no executor) → the response ends
  with the `function_call` items, status `completed` (OpenAI) or `requires_action`
  (`inference.client_tool_status`, spec 002);
- otherwise the server-side calls run concurrently, their results are fed back in call
  order and the loop goes on. A call to a tool the request does not have, or one
  outside `allowed_tools`, or beyond `max_tool_calls`, is never executed: the model is
  told with an error result. Chat Completions' `tool` message has no error flag, so an
  error result's content is `Error: <message>` (and `is_error` on the stored item).
A round that mixes client-side and server-side calls pauses whole (spec 002): the
server-side calls are not run, their items (`mcp_call`) fail saying so. Calls that need
the client's approval (`mcp_approval_request` items) are not run either: the round's
other calls run, then the response ends. Before the first round `Plan.prelude` runs
(the MCP listing and approved calls, `mcp_tools.py`), after `response.in_progress`.
A `required` or forced `tool_choice` applies to the first round only (then `auto`, as
spec 000 says), or the model would call tools forever. Usage is summed over the rounds,
and reported to the turn as each round ends (`Plan.round_ended`). Before each round after
the first the turn is asked to admit it (`Plan.admit_round`, with the tokens its context
comes to): refused, the response ends `incomplete` with what it has (reason null: the
`openai` types only know `max_output_tokens` and `content_filter`). `max_infer_iters`
rounds without a final answer → `incomplete`. Cancelling the task that iterates the
loop (a client that went away) cancels the upstream stream and every running tool.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence

import orjson

from gateway.engine.chat_round import CUT, ChatRound, UpstreamChatError, UpstreamStreamLost
from gateway.engine.chat_stream import Chunk
from gateway.engine.emitter import Emitter
from gateway.engine.executor import ToolCall, ToolExecutor, ToolResult
from gateway.engine.hooks import EngineHooks, shielded
from gateway.engine.plan import Plan
from gateway.engine.translate import add_usage, incomplete_reason, usage_of
from gateway.schema.errors import ApiError
from gateway.schema.ids import new_item_id
from gateway.streaming.events import Event
from gateway.upstream.errors import upstream_error

log = logging.getLogger("gateway.engine")
NOT_RUN = ("Not run: this round also called a client-side function tool, and such a round pauses whole "
           "(spec 002); call the tool again if it is still needed.")

# The model: a chat request in, the decoded chunks of its stream out, a list per read.
Model = Callable[[dict[str, Any]], AsyncGenerator[list[Chunk], None]]
# Called with the items produced so far and whether the response is finished.
Save = Callable[[Emitter, bool], Awaitable[None]]


class Loop:
    def __init__(self, model: Model, executors: Sequence[ToolExecutor] = (), hooks: EngineHooks | None = None):
        self._model = model
        self._executors = tuple(executors)
        self._hooks = hooks

    def _executor(self, tool: dict[str, Any]) -> ToolExecutor | None:
        return next((executor for executor in self._executors if executor.can_execute(tool)), None)

    async def run(self, plan: Plan, emitter: Emitter, save: Save) -> AsyncIterator[list[Event]]:
        """The events of the response, a list per upstream read; the last list ends with
        the terminal event. Errors before the first event (the upstream refused the first
        request) raise `ApiError`; after it they end the stream with `response.failed`."""
        usage = usage_of(None)
        tool_calls = 0
        started = False
        if plan.prelude is not None or plan.start_at_once:
            started = True
            emitter.start()
            await save(emitter, False)
            if plan.prelude is None:
                yield emitter.take()
            else:
                async for events in plan.prelude():
                    yield events
        choice = plan.tool_choice
        for index in range(plan.max_infer_iters):
            if index and plan.admit_round is not None and not await plan.admit_round(_context_tokens(plan)):
                yield await self._end(emitter, save, emitter.finish("incomplete", usage))
                return
            chat = {**plan.chat, "messages": plan.messages}
            if choice is not None:
                chat["tool_choice"] = choice
            round_ = ChatRound(emitter, plan.seen_call_ids)
            emitter.round_text.clear()
            if self._hooks is not None:
                shielded(self._hooks, "round_started")
            try:
                try:
                    async for chunks in self._model(chat):
                        if not started:
                            _refuse_before_the_first_event(chunks)
                            started = True
                            emitter.start()
                            await save(emitter, False)
                        for chunk in chunks:
                            round_.feed(chunk)
                        yield emitter.take()
                except UpstreamStreamLost as lost:
                    # No `[DONE]`, but the round's end (`finish_reason`) came: some servers end so.
                    if lost.args[0] != CUT or round_.finish_reason is None:
                        if plan.round_lost is not None:
                            plan.round_lost()
                        raise
            except (ApiError, UpstreamChatError) as exc:
                if self._hooks is not None:
                    shielded(self._hooks, "round", False)
                if getattr(exc, "upstream_received", False) and plan.round_lost is not None:
                    plan.round_lost()   # sent, then no answer in time or lost: it had the round
                if not started:
                    raise exc.before_start() if isinstance(exc, UpstreamStreamLost) else exc
                message = exc.cause if isinstance(exc, ApiError) else str(exc)
                log.warning("the upstream failed during %s: %s", emitter.response["id"], message)
                yield await self._end(emitter, save, emitter.fail(message, usage))
                return
            if self._hooks is not None:
                shielded(self._hooks, "round", True)
            if not started:  # an upstream that answered with an empty stream
                started = True
                emitter.start()
            calls = emitter.close_items()
            usage = add_usage(usage, round_.usage or usage_of(None))
            if plan.round_ended is not None:
                plan.round_ended(usage)
            reason = incomplete_reason(round_.finish_reason)
            if reason is not None:
                yield await self._end(emitter, save, emitter.finish("incomplete", usage, reason))
                return
            if not calls or plan.tool_choice == "none":
                yield await self._end(emitter, save, emitter.finish("completed", usage))
                return
            if any(self._client_side(plan, call) for call in calls):
                # Spec 002: a round with a client call pauses whole; its server-side calls
                # are not run (their items say so, and the model reads it next turn).
                for call in calls:
                    emitter.call_done(call["call_id"], _error(NOT_RUN).fields, True)
                yield await self._end(emitter, save, emitter.finish(plan.client_tool_status, usage))
                return
            # Calls waiting for the client's approval (mcp_approval_request items) are not
            # run: the others of the round are, then the response ends for the approval.
            awaiting = [call for call in calls if call.get("approval")]
            calls = [call for call in calls if not call.get("approval")]
            plan.messages.append({"role": "assistant", "content": "".join(emitter.round_text) or None,
                                  "tool_calls": [{"id": call["call_id"], "type": "function",
                                                  "function": {"name": call["name"], "arguments": call["arguments"]}}
                                                 for call in calls]})
            yield emitter.take()  # the calls' in_progress events before they run
            results, tool_calls = await self._execute(plan, calls, tool_calls)
            for call, result in zip(calls, results):
                if result.citations:
                    emitter.cite(result.citations)
                if not emitter.call_done(call["call_id"], result.fields, result.is_error):
                    # No item of its own (an mcp_call's shows the result): an output item.
                    for item in result.items or [_output_item(call, result)]:
                        emitter.add_item(item)
                plan.messages.append({"role": "tool", "tool_call_id": call["call_id"],
                                      "content": f"Error: {result.output}" if result.is_error else result.output})
            if awaiting:
                yield await self._end(emitter, save, emitter.finish("completed", usage))
                return
            yield emitter.take()
            await save(emitter, False)
            if choice is not None:
                choice = "auto"  # required or forced: the first round only (spec 000: no endless loop)
        yield await self._end(emitter, save, emitter.finish("incomplete", usage))

    async def _end(self, emitter: Emitter, save: Save, terminal: Event) -> list[Event]:
        """The last events: saved before the client can see the terminal one."""
        await save(emitter, True)
        return [*emitter.take(), terminal]

    def _client_side(self, plan: Plan, call: dict[str, Any]) -> bool:
        """A call the client runs: a tool of the request that no executor serves."""
        tool = plan.tools.get(call["name"])
        return tool is not None and _allowed(plan, call["name"]) and self._executor(tool) is None

    async def _execute(self, plan: Plan, calls: list[dict[str, Any]], made: int,
                       ) -> tuple[list[ToolResult], int]:
        """Every call's result, in call order; allowed calls run concurrently."""
        jobs: list[Awaitable[ToolResult]] = []
        for call in calls:
            tool = plan.tools.get(call["name"])
            if tool is None:
                jobs.append(_refused(f"The tool {call['name']!r} does not exist; the tools are: "
                                     f"{', '.join(sorted(plan.tools)) or 'none'}."))
            elif not _allowed(plan, call["name"]):
                jobs.append(_refused(f"The tool {call['name']!r} is not allowed for this request."))
            elif plan.max_tool_calls is not None and made >= plan.max_tool_calls:
                jobs.append(_refused(f"The limit of {plan.max_tool_calls} tool calls for this response "
                                     "was reached; answer without calling tools."))
            else:
                made += 1
                executor = self._executor(tool)
                assert executor is not None
                jobs.append(_run(executor, ToolCall(call["call_id"], call["name"], call["arguments"], tool),
                                 self._hooks))
        # gather: a cancelled loop cancels every running tool with it.
        return list(await asyncio.gather(*jobs)), made


def _context_tokens(plan: Plan) -> int:
    """What a round sends, at four characters a token: every message and the tools."""
    size = len(orjson.dumps(plan.messages))
    if plan.chat.get("tools"):
        size += len(orjson.dumps(plan.chat["tools"]))
    return math.ceil(size / 4)


def _refuse_before_the_first_event(chunks: list[Chunk]) -> None:
    """An upstream whose stream opens with an error gets the HTTP error: nothing was
    sent to the client yet."""
    first = chunks[0] if chunks else None
    if first.__class__ is dict and first.get("error") is not None:
        error = first["error"]
        raise upstream_error(500, str(error.get("message") if isinstance(error, dict) else error))


def _allowed(plan: Plan, name: str) -> bool:
    return plan.allowed is None or name in plan.allowed


def _error(message: str) -> ToolResult:
    """An error result; a call that is an item of its own shows it as the `openai`
    package's tool-execution error object."""
    return ToolResult(message, is_error=True, fields={"error": {
        "type": "mcp_tool_execution_error", "content": [{"type": "text", "text": message}]}})


async def _refused(message: str) -> ToolResult:
    return _error(message)


async def _run(executor: ToolExecutor, call: ToolCall, hooks: EngineHooks | None) -> ToolResult:
    if hooks is not None:
        shielded(hooks, "tool_started", str(call.tool.get("type") or "function"))
    started = time.perf_counter()
    try:
        result = await executor.execute(call)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("tool %s failed: %s", call.name, exc)
        result = _error(f"{type(exc).__name__}: {exc}")
    if hooks is not None:
        shielded(hooks, "tool", str(call.tool.get("type") or "function"), not result.is_error,
                 time.perf_counter() - started)
    return result


def _output_item(call: dict[str, Any], result: ToolResult) -> dict[str, Any]:
    item: dict[str, Any] = {"id": new_item_id("fco"), "type": "function_call_output", "call_id": call["call_id"],
                            "output": result.output, "status": "completed"}
    if result.is_error:
        item["is_error"] = True
    return item
