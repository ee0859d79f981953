"""The agentic loop of spec 004, sans I/O: one generator for the sync and async agents.

`run_loop` yields effects (call the model, run these function calls, ask about these
approvals, tell the caller this event) and is sent back what each produced; the drivers
in `drive.py` do the I/O with `OpenAI` or `AsyncOpenAI`. So the rules (what is sent,
when the loop stops, how the state changes) exist once.

State changes only when a model call succeeded (`AgentState.commit`): a call that fails
leaves the agent as it was before it, so the same `run`/`resume` can be tried again
(function calls already run are then run again: tools run at least once, not exactly
once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator, Literal

from pydantic import BaseModel

from .errors import AgentStateError, ResponseFailedError
from .results import (ApprovalRequest, ApprovalRequestEvent, Event, RunResult, RunStatus,
                      ToolCallEvent)
from .tools import FunctionTool, Toolset

Chain = Literal["previous_response_id", "conversation"]


@dataclass(slots=True)
class AgentConfig:
    model: str | None
    instructions: str | None
    max_turns: int
    store: bool
    chain: Chain
    merge_server_tools: bool
    ask_approvals: bool  # an on_approval callback exists


@dataclass(slots=True)
class AgentState:
    """Everything an agent knows between runs; `snapshot.py` writes and reads it."""

    previous_response_id: str | None = None
    conversation: str | None = None
    # Every item of the agent's conversation, in order: what it sent and what came back.
    # With store=False it is the request's input; with store=True it is kept so the
    # state can be inspected and restored anywhere.
    history: list[dict[str, Any]] = field(default_factory=list)
    # function_call items the model asked for and no output has answered yet.
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    # mcp_approval_request items no mcp_approval_response has answered yet.
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)

    def commit(self, sent: list[dict[str, Any]], response: dict[str, Any], store: bool) -> None:
        output = [item for item in response.get("output") or () if isinstance(item, dict)]
        self.history.extend(sent)
        self.history.extend(output)
        self.previous_response_id = response.get("id") if store else None
        conversation = response.get("conversation")
        if isinstance(conversation, dict):  # OpenAI's object form
            conversation = conversation.get("id")
        if isinstance(conversation, str):
            self.conversation = conversation
        self.pending_calls = [i for i in output if i.get("type") == "function_call"]
        self.pending_approvals = [i for i in output if i.get("type") == "mcp_approval_request"]


@dataclass(slots=True)
class CallModel:
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass(slots=True)
class Prepared:
    """A function call checked before it runs: `tool` and `values` when it may run,
    else `error` is the output the model sees."""

    call_id: str
    name: str
    tool: FunctionTool | None = None
    values: BaseModel | None = None
    error: str | None = None


@dataclass(slots=True)
class Outcome:
    output: str
    is_error: bool


@dataclass(slots=True)
class RunCalls:
    calls: list[Prepared]  # the driver answers with one Outcome per call, in this order


@dataclass(slots=True)
class AskApprovals:
    requests: list[ApprovalRequest]  # answered with {request id: bool}


@dataclass(slots=True)
class Emit:
    event: Event


Effect = CallModel | RunCalls | AskApprovals | Emit
Loop = Generator[Effect, Any, RunResult]


def user_items(value: Any) -> list[dict[str, Any]]:
    """A run's input: a text, or Responses input items."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return [dict(item) for item in value]
    raise TypeError("input must be a string or a list of Responses input items (dicts)")


def prepare(item: dict[str, Any], toolset: Toolset) -> Prepared:
    call_id, name = str(item.get("call_id") or ""), str(item.get("name") or "")
    found = toolset.functions.get(name)
    if found is None:
        return Prepared(call_id, name, error=f"Error: there is no tool named {name!r}")
    try:
        values = found.schema.arguments.validate(item.get("arguments") or "", found.schema.strict)
    except ValueError as exc:
        return Prepared(call_id, name, error=f"Error: {name} was not called: {exc}")
    return Prepared(call_id, name, tool=found, values=values)


def final_text(response: dict[str, Any]) -> str:
    texts = []
    for item in response.get("output") or ():
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
    return "".join(texts)


def run_loop(config: AgentConfig, state: AgentState, toolset: Toolset,
             new_items: list[dict[str, Any]], approvals: dict[str, bool] | None) -> Loop:
    """One run: from `new_items` (a run) or the pending calls and approvals (a resume)
    to a final answer, `max_turns` model calls, or approvals to wait for."""
    result = RunResult(conversation=state.conversation, response_id=state.previous_response_id)
    outgoing = list(new_items)
    turns = 0
    while True:
        if turns and not (state.pending_calls or state.pending_approvals):
            return result  # the last response was the final answer (set below)
        if state.pending_calls or state.pending_approvals:
            if turns >= config.max_turns:
                return _stopped(result, state, "max_turns")
            verdicts = yield from _approvals(config, state, approvals)
            if verdicts is None:
                return _stopped(result, state, "pending_approval")
            approvals = None  # the caller's answers serve the first round only
            outgoing += [{"type": "mcp_approval_response", "approval_request_id": request_id,
                          "approve": verdict} for request_id, verdict in verdicts.items()]
            outgoing += yield from _run_calls(state, toolset)
        response = yield CallModel(_body(config, state, toolset, outgoing), _headers(config))
        turns += 1
        status = response.get("status")
        if status == "failed" or response.get("error"):
            error = response.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else None
            raise ResponseFailedError(f"the response failed: {message or status}", response)
        state.commit(outgoing, response, config.store)
        result.items.extend(outgoing)
        result.items.extend(i for i in response.get("output") or () if isinstance(i, dict))
        result.usage.add(response.get("usage"))
        result.response_id = response.get("id")
        result.conversation = state.conversation
        result.output_text = final_text(response)
        result.status = "incomplete" if status == "incomplete" else "completed"
        outgoing = []


def _stopped(result: RunResult, state: AgentState, status: RunStatus) -> RunResult:
    result.status = status
    result.pending_approvals = [ApprovalRequest.from_item(i) for i in state.pending_approvals]
    return result


def _approvals(config: AgentConfig, state: AgentState,
               given: dict[str, bool] | None) -> Generator[Effect, Any, dict[str, bool] | None]:
    """The verdict on every pending approval request: the caller's (resume), else the
    callback's; None when some are left for the caller to decide."""
    pending = [ApprovalRequest.from_item(item) for item in state.pending_approvals]
    verdicts = dict(given or {})
    unknown = set(verdicts) - {request.id for request in pending}
    if unknown:
        raise AgentStateError(f"no pending approval request has the id(s) {sorted(unknown)}")
    for request in pending:
        if request.id in verdicts:
            yield Emit(ApprovalRequestEvent(request, verdicts[request.id]))
    asked = [request for request in pending if request.id not in verdicts]
    if asked and not config.ask_approvals:
        for request in asked:
            yield Emit(ApprovalRequestEvent(request, None))
        return None
    if asked:
        answers = yield AskApprovals(asked)
        for request in asked:
            verdicts[request.id] = bool(answers[request.id])
    return verdicts


def _run_calls(state: AgentState, toolset: Toolset) -> Generator[Effect, Any, list[dict[str, Any]]]:
    if not state.pending_calls:
        return []
    prepared = [prepare(item, toolset) for item in state.pending_calls]
    for item in state.pending_calls:
        yield Emit(ToolCallEvent(str(item.get("call_id") or ""), str(item.get("name") or ""),
                                 str(item.get("arguments") or "")))
    outcomes: list[Outcome] = yield RunCalls(prepared)
    return [{"type": "function_call_output", "call_id": call.call_id, "output": outcome.output}
            for call, outcome in zip(prepared, outcomes)]


def _body(config: AgentConfig, state: AgentState, toolset: Toolset,
          outgoing: list[dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {"store": config.store}
    if config.model:
        body["model"] = config.model
    if config.instructions:
        # previous_response_id does not carry instructions over: every request has them.
        body["instructions"] = config.instructions
    if not config.store:
        body["input"] = [*state.history, *outgoing]  # the server keeps nothing: all of it
    else:
        body["input"] = outgoing
        if config.chain == "conversation" and state.conversation:
            body["conversation"] = state.conversation
        elif state.previous_response_id:
            body["previous_response_id"] = state.previous_response_id
    definitions = toolset.definitions()
    if definitions:
        body["tools"] = definitions
    return body


def _headers(config: AgentConfig) -> dict[str, str]:
    return {"X-LCS-Merge-Server-Tools": "true"} if config.merge_server_tools else {}
