"""`Agent`: the client-side agent of spec 004 over the Responses API.

The agent owns its state (history, the last response id, the gateway's conversation,
the calls and approvals a run stopped at) and runs the loop on the client, with the sync
`OpenAI` client (`run`, `resume`, `stream`) or `AsyncOpenAI` (`arun`, `aresume`,
`astream`). Guardrails against inconsistent state: one run at a time per agent; a new
run refused while approvals or function calls wait (`resume` first); state changed only
by a model call that succeeded; snapshots checked as untrusted input.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, AsyncIterator, Iterable, Iterator, Mapping

import openai

from . import snapshot as snapshots
from .drive import Approver, drive_async, drive_sync
from .errors import AgentStateError, MissingToolError
from .loop import AgentConfig, AgentState, Chain, run_loop, user_items
from .results import ApprovalRequest, Event, ResultEvent, RunResult
from .tools import build_toolset

CHAINS = ("previous_response_id", "conversation")


class Agent:
    """An agent: a model, instructions and tools, and the state of its conversation.

    client: `openai.OpenAI` (for run/resume/stream) or `openai.AsyncOpenAI` (for
    arun/aresume/astream), pointed at the gateway or any Responses API. model: None lets
    the server choose (the gateway's default model). tools: Python functions (sync or
    async; see `tool()`) and server-side tool descriptions (dicts of type file_search,
    mcp, web_search). max_turns: model calls per run (or resume). store: False keeps
    nothing on the server, the agent sends the whole history each time. on_approval:
    `(ApprovalRequest) -> bool` (or async) answering MCP approval requests; without it a
    run stops at them (`RunResult.pending_approvals`, then `resume`).

    Keyword-only: chain ("previous_response_id", or "conversation" to continue the
    gateway's conversation by its id); merge_server_tools (send
    `X-LCS-Merge-Server-Tools: true`: the gateway adds its configured tools to the
    agent's instead of using the agent's alone).
    """

    def __init__(self, client: Any, model: str | None = None, instructions: str | None = None,
                 tools: Iterable[Any] = (), max_turns: int = 10, store: bool = True,
                 on_approval: Approver | None = None, *, chain: Chain = "previous_response_id",
                 merge_server_tools: bool = False) -> None:
        if not hasattr(client, "responses"):
            raise TypeError("client must be an openai.OpenAI or openai.AsyncOpenAI client")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError("max_turns must be a positive integer")
        if chain not in CHAINS:
            raise ValueError(f"chain must be one of {CHAINS}")
        if on_approval is not None and not callable(on_approval):
            raise TypeError("on_approval must be a function (request) -> bool")
        self.client = client
        self.on_approval = on_approval
        self._toolset = build_toolset(tools)
        self._config = AgentConfig(model, instructions, max_turns, bool(store), chain,
                                   bool(merge_server_tools), on_approval is not None)
        self._state = AgentState()
        self._lock = threading.Lock()
        self._busy = False

    # What the agent knows, read-only views: change it by running, not by hand.
    @property
    def history(self) -> list[dict[str, Any]]:
        return [dict(item) for item in self._state.history]

    @property
    def previous_response_id(self) -> str | None:
        return self._state.previous_response_id

    @property
    def conversation(self) -> str | None:
        return self._state.conversation

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        return [ApprovalRequest.from_item(item) for item in self._state.pending_approvals]

    @property
    def tool_definitions(self) -> list[dict[str, Any]]:
        """The `tools` the agent sends with every request."""
        return self._toolset.definitions()

    # -- runs ---------------------------------------------------------------------------

    def run(self, input: str | list[dict[str, Any]]) -> RunResult:
        return _last(self._events(self._new_run(input), stream=False))

    def resume(self, approvals: Mapping[str, bool] | None = None) -> RunResult:
        """Continue a run that stopped at approvals (answer them: {request id: bool}) or
        at max_turns (its pending function calls run first)."""
        return _last(self._events(self._resumed(approvals), stream=False))

    def stream(self, input: str | list[dict[str, Any]]) -> Iterator[Event]:
        return self._events(self._new_run(input), stream=True)

    async def arun(self, input: str | list[dict[str, Any]]) -> RunResult:
        return await _alast(self._aevents(self._new_run(input), stream=False))

    async def aresume(self, approvals: Mapping[str, bool] | None = None) -> RunResult:
        return await _alast(self._aevents(self._resumed(approvals), stream=False))

    def astream(self, input: str | list[dict[str, Any]]) -> AsyncIterator[Event]:
        return self._aevents(self._new_run(input), stream=True)

    def _new_run(self, input: Any) -> tuple[list[dict[str, Any]], dict[str, bool] | None]:
        items = user_items(input)
        state = self._state
        if state.pending_approvals or state.pending_calls:
            waiting = (f"{len(state.pending_approvals)} approval request(s)" if state.pending_approvals
                       else f"{len(state.pending_calls)} function call(s)")
            raise AgentStateError(f"the last run stopped with {waiting} unanswered: call resume() first")
        return items, None

    def _resumed(self, approvals: Mapping[str, bool] | None) -> tuple[list[dict[str, Any]], dict[str, bool]]:
        if not (self._state.pending_approvals or self._state.pending_calls):
            raise AgentStateError("nothing to resume: the last run finished")
        verdicts = {str(key): bool(value) for key, value in (approvals or {}).items()}
        return [], verdicts

    def _enter(self) -> None:
        with self._lock:
            if self._busy:
                raise AgentStateError("this agent is already running: one run at a time "
                                      "(use one Agent per concurrent conversation)")
            self._busy = True

    def _leave(self) -> None:
        with self._lock:
            self._busy = False

    def _events(self, start: tuple[list[dict[str, Any]], dict[str, bool] | None],
                stream: bool) -> Iterator[Event]:
        if _is_async(self.client):
            raise TypeError("this agent has an AsyncOpenAI client: use arun/aresume/astream")
        return self._guarded(drive_sync(self._loop(start), self.client, stream, self.on_approval))

    def _guarded(self, events: Iterator[Event]) -> Iterator[Event]:
        # Entered at the first event: a stream made and dropped unread holds nothing.
        self._enter()
        try:
            yield from events
        finally:
            self._leave()

    def _aevents(self, start: tuple[list[dict[str, Any]], dict[str, bool] | None],
                 stream: bool) -> AsyncIterator[Event]:
        if not _is_async(self.client):
            raise TypeError("this agent has a sync OpenAI client: use run/resume/stream")
        return self._aguarded(drive_async(self._loop(start), self.client, stream, self.on_approval))

    async def _aguarded(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        self._enter()
        try:
            async for event in events:
                yield event
        finally:
            self._leave()

    def _loop(self, start: tuple[list[dict[str, Any]], dict[str, bool] | None]) -> Any:
        items, approvals = start
        return run_loop(self._config, self._state, self._toolset, items, approvals)

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The agent's configuration and state as JSON-serialisable data (versioned);
        its tools' code is not in it: `restore` is given the tools again."""
        if self._busy:
            raise AgentStateError("cannot snapshot an agent while it runs")
        return snapshots.dump(self._config, self._state, list(self._toolset.functions))

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any] | str | bytes, client: Any,
                tools: Iterable[Any] = (), on_approval: Approver | None = None) -> "Agent":
        """An agent continuing a snapshot (a dict or its JSON text), checked as untrusted
        input (SnapshotError); MissingToolError when `tools` lacks a function the
        snapshot's pending calls need."""
        checked = snapshots.load(dict(snapshot) if isinstance(snapshot, Mapping) else snapshot)
        agent = cls(client, model=checked.model, instructions=checked.instructions, tools=tools,
                    max_turns=checked.max_turns, store=checked.store, on_approval=on_approval,
                    chain=checked.chain, merge_server_tools=checked.merge_server_tools)
        missing = sorted({call.name for call in checked.pending_calls} - set(agent._toolset.functions))
        if missing:
            raise MissingToolError(f"the snapshot's pending function calls need the tool(s) {missing}, "
                                   "which the tools given to restore() lack")
        agent._state = snapshots.state_of(checked)
        return agent


def _is_async(client: Any) -> bool:
    if isinstance(client, openai.AsyncOpenAI):
        return True
    return inspect.iscoroutinefunction(getattr(getattr(client, "responses", None), "create", None))


def _last(events: Iterator[Event]) -> RunResult:
    result = None
    for event in events:
        if isinstance(event, ResultEvent):
            result = event.result
    assert result is not None  # every driver ends with a ResultEvent
    return result


async def _alast(events: AsyncIterator[Event]) -> RunResult:
    result = None
    async for event in events:
        if isinstance(event, ResultEvent):
            result = event.result
    assert result is not None
    return result
