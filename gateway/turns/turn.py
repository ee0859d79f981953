"""A turn: what `prepare()` planned for one request (`Plan`, frozen), how it ended
(`Outcome`, the settler's), the two together as it runs (`Turn`, the unit every
endpoint, transport and backend passes around), and where it runs (`Backend`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, AsyncContextManager, AsyncIterator, Awaitable, Callable, Mapping, Protocol

from gateway.identity import Identity
from gateway.quota.reservation import Reservation
from gateway.schema.errors import ApiError
from gateway.schema.ids import openai_conversation_id, shown_conversation_id
from gateway.schema.json_types import JsonObject, ResponseUsage
from gateway.schema.responses_request import ResponsesRequest
from gateway.storage.conversations import ConversationRecord
from gateway.streaming.events import Event
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.in_progress import InProgress
from gateway.upstream.catalog import ModelInfo

# What a backend's stream yields per upstream read, fed to the rewriter: the upstream's
# SSE bytes (forward: the rewriter's fast path) or a list of events (the engine).
Feed = Callable[[Any], tuple[bytes, Event | None]]
# A JSON answer: an object, or bytes relayed as the upstream sent them.
Json = JsonObject | bytes


@dataclass(frozen=True, slots=True)
class Plan:
    """What `prepare()` decided for one request: where it runs, what it sends, what it
    continues, whom it charges. Frozen: nothing changes it after prepare (a turn that
    ends otherwise than planned says so in its `Outcome`)."""

    identity: Identity
    backend: "Backend"                   # where it runs: chosen once, by prepare()
    stream: bool
    previous_response_id: str | None     # as the client named it (echoed in responses)
    generate_topic_summary: bool | None
    headers: dict[str, str]              # extra upstream headers (provider data)
    model: ModelInfo
    display_model: str                   # the response's `model`: as sent, or LCORE's short form
    conversation_id: str | None          # bare stored form; None: a `store: false` turn in none
    upstream_conversation_id: str | None  # `conv_…` when the upstream keeps the conversation
    existing: ConversationRecord | None  # None: this turn starts the conversation
    forked_from: str | None              # the response this turn forks from (a new conversation)
    store: bool = True                   # False: nothing is created or recorded for this turn
    background: bool = False             # run detached from the client (`background: true`)
    # A question-validity shield's answer (`turns/blocked.py`): the question never reaches
    # the model. What adapters and observers ask instead of the backend's class.
    blocked: str | None = None
    append_to_upstream: bool = False    # sent with previous_response_id; add it to the conversation after
    appended_input: Any = None           # the input to add then (kept only in that case)
    reservation: Reservation | None = None  # the tokens admission reserved (quota_handlers)
    extend: Callable[[int], Awaitable[None]] | None = None  # more tokens on the reservation, or 429
    server_prompt: bool = False          # the instructions are the operator's: shown as LCORE's placeholder
    # How responses show `conversation` (`schema/ids.py` `sent_form`): `string` (`conv_…`),
    # `object` (`{"id": ...}`, issue 23) or `bare` (LCORE's 48 hex), as the client named it.
    conversation_form: str = "string"
    added_items: tuple[str, ...] = ()    # items clients added that this turn sends (pending again if it fails)
    added_input: tuple[JsonObject, ...] = ()   # and those items as its input (first in it)
    question: str = ""                   # a stored turn's user text (`body.question_text`), for its content
    requested_model: str | None = None   # the model as the request named it (`provider/model`), for transcripts
    attachments: tuple[dict[str, Any], ...] = ()  # a legacy query's attachments (redacted), for transcripts
    started: float = field(default_factory=time.time)  # formatted only when recorded
    clock: float = field(default_factory=time.perf_counter)  # the same moment, for durations (observers)

    @property
    def conversation(self) -> str | None:
        """The id returned to clients (`conv_<48 hex>`, spec 001)."""
        return openai_conversation_id(self.conversation_id) if self.conversation_id else None

    @property
    def shown_conversation(self) -> str | dict[str, str] | None:
        """`conversation` as this turn's response objects show it: in the form the client
        named it in (the id `conv_…`, OpenAI's `{"id": ...}` or LCORE's bare id), the form
        of the turn it continues or forks from by `previous_response_id`, else the
        operator's."""
        if self.conversation_id is None:
            return None
        return shown_conversation_id(self.conversation_id, self.conversation_form)


# Speed trick, fenced: how a `Plan` is made on every turn. The plain version,
# `Plan(identity=..., ...)`, costs ~20k instructions (callgrind): each keyword argument
# costs ~500 (~14k for 25 of them, a function's as much as a class's), and a frozen
# dataclass's `__init__` sets each field through `object.__setattr__`. `prepare()` calls
# `PlanDraft` positionally instead (a plain slots dataclass of the same fields, typed as
# `Plan`, so mypy checks each argument against its field) and `frozen()` makes the draft
# the `Plan` it is (same slots, so the same layout): ~8k. `tests/turns/test_turn.py`
# checks that the two make equal plans.
PlanDraft: type[Plan] = make_dataclass(
    "PlanDraft", [(spec.name, spec.type, field(default=spec.default, default_factory=spec.default_factory))
                  for spec in fields(Plan)], slots=True)


def frozen(draft: Plan) -> Plan:
    """A `PlanDraft(...)` as the frozen `Plan` it stands for."""
    draft.__class__ = Plan
    return draft


@dataclass(slots=True)
class Outcome:
    """How the turn ended, as `turns/settle.py` records it: written there only (the
    `Settler`), read by the runner, the adapters and the observers. It starts as the
    plan says (recorded if stored, appended to the upstream conversation if chained);
    the settler changes that when the turn ends otherwise (a `/v1/query` turn stopped
    for length is not recorded; an interrupted stream is appended with its partial
    answer)."""

    recorded: bool                       # its record is committed (False: charged only)
    append_to_upstream: bool = False     # its input and output go to the upstream conversation
    appended_input: Any = None           # that input
    result: JsonObject | None = None  # the terminal response object
    quotas: dict[str, int] | None = None  # available_quotas once settled
    abandoned: bool = False              # the client left before the backend finished
    # The upstream received it, then its stream broke (reset, idle gap, cut, the
    # shutdown's grace over) before it reported usage: charged as a stopped turn.
    unreported: bool = False
    # Set before its stream is cancelled when the client stops it and keeps what it got
    # (an interrupted streaming query): the backend keeps the partial response
    # (`incomplete`, with this reason) where it stores responses.
    stopped_reason: str | None = None
    gave_back: bool = False              # the items it took are pending again (`Settler.give_back`)
    settling: asyncio.Future[Any] | None = None  # its charge and record being committed


@dataclass(slots=True)
class Turn:
    """A prepared turn as it runs: its `plan` (prepare's, frozen), its `outcome` (the
    settler's), and what the runner, its backend and its observers keep while it runs."""

    plan: Plan
    outcome: Outcome
    body: JsonObject                 # what is sent to the backend (dropped once sent)
    summary: asyncio.Future[str] | None = None  # the topic summary being made (`turns/summary.py`), its text
    in_progress: "InProgress | None" = None  # counts it among its user's running turns until it ends
    # What the engine reported so far (`round_ended`): the usage of its finished rounds,
    # and the estimate of the round in flight (0: admission's reservation covers it).
    usage: ResponseUsage | None = None
    round_estimate: int = 0
    observed_settled: bool = False      # the `settled` hook ran (once, whoever settled it)
    observed: Any = None                 # what observers of its hooks keep about it (metrics)
    observed_at: float = 0.0             # and when they last saw it (its first event, its stream's end)
    events: int = 0                      # a stream's: the frames its sink was sent (set at its end)

    # What the engine calls as its rounds go (`engine/turn.py` EngineTurn): it knows
    # nothing of quotas, the turn does.

    def round_ended(self, usage: ResponseUsage) -> None:
        """A round ended: the usage of every finished round so far."""
        self.usage = usage
        self.round_estimate = 0

    def round_lost(self) -> None:
        """A round's stream was lost before the upstream reported its usage: charged as
        a stopped turn (`stopped_charge`), whatever its finished rounds reported."""
        self.outcome.unreported = True

    async def admit_round(self, context_tokens: int) -> bool:
        """Before each round after the first: reserve what this round may use (the
        context it sends and its answer) beyond what the turn already reserved and used.
        False: the balance cannot cover it (the turn ends with what it has)."""
        plan = self.plan
        reservation = plan.reservation
        if reservation is None:
            return True
        self.round_estimate = estimate = context_tokens + reservation.output
        need = self.used + estimate - reservation.tokens
        if need <= 0 or plan.extend is None:
            return True
        try:
            await plan.extend(need)
        except ApiError:
            return False
        return True

    @property
    def used(self) -> int:
        """The input + output tokens the upstream reported so far (the engine's rounds)."""
        usage = self.usage
        return int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0) if usage else 0

    def stopped_charge(self) -> int:
        """What a turn stopped before its end (abandoned, cancelled) is charged: its
        finished rounds' usage plus the estimate of the round in flight, and never less
        than it reserved (aborting is no way around a quota)."""
        reservation = self.plan.reservation
        reserved = reservation.tokens if reservation is not None else 0
        return max(self.used + self.round_estimate, reserved)


class Backend(Protocol):
    """Where a prepared turn runs (one interface, two implementations: docs/architecture.md,
    "One request, one way through"): the
    upstream's Responses API (`turns/forward.py`) or the local engine over the
    upstream's Chat Completions (`turns/local.py`). `prepare()` picks one per turn; the runner
    never asks which it holds (docs/architecture.md names the two modules that do)."""

    # Before anything is created.

    async def accept(self, raw: Any, refusal: ApiError) -> ResponsesRequest:
        """A request LCORE's model refused, as this backend may still accept it (the
        engine: `item_reference` input items); else the refusal."""

    async def check(self, raw: JsonObject, tools: list[JsonObject] | None) -> None:
        """Refuse (4xx) what this backend cannot run, with the tools the turn will send."""

    def body(self, raw: JsonObject, request: ResponsesRequest, plan: Plan,
             tools: list[JsonObject] | None) -> JsonObject:
        """The Responses body the turn sends this backend."""

    # The conversation the turn belongs to, where the backend keeps one.

    async def create_conversation(self) -> str | None:
        """A new conversation id of the backend's own (`conv_…`), or None: the gateway's."""

    async def append_items(self, conversation_id: str, items: list[JsonObject]) -> None:
        """Add a chained turn's input and output to the backend's conversation."""

    # A stored conversation's state there (the conversations endpoints).

    async def reach_conversation(self, upstream_id: str | None) -> None:
        """Raise LCORE's 503 when the upstream holding the conversation is unreachable."""

    async def rename_conversation(self, upstream_id: str | None, topic_summary: str) -> None:
        """Give the backend's conversation its new topic summary (503 when unreachable)."""

    async def forget_conversation(self, upstream_id: str | None, response_ids: tuple[str, ...]) -> None:
        """Delete what the backend keeps of a deleted conversation (its conversation and
        stored responses upstream; the engine's are rows the gateway already deleted)."""

    # Running it.

    async def respond(self, turn: Turn) -> JsonObject:
        """The finished response object (a JSON request)."""

    def open(self, turn: Turn) -> AsyncContextManager[AsyncIterator[Any]]:
        """The turn's stream: `async with backend.open(turn) as reads`, then one item
        per upstream read, to be fed to the rewriter by `feed()`."""

    def feed(self, rewriter: StreamRewriter) -> Feed:
        """The rewriter's entry for what this backend's stream yields."""

    async def summarize(self, model: str, instructions: str, text: str) -> str:
        """One extra call, stored nowhere and charged to no one: the model's answer to
        `text` under `instructions` (a new conversation's topic summary)."""

    # Stored responses (`GET`/`DELETE /v1/responses/{id}`, its input items, the list),
    # scoped to the caller: None where the caller owns no such response.

    async def owns(self, identity: Identity, response_id: str) -> bool:
        """Whether the caller has a stored response of this id."""

    async def stored(self, identity: Identity, response_id: str) -> JsonObject | None:
        """The stored response object, as the client reads it back."""

    async def delete(self, identity: Identity, response_id: str) -> Json | None:
        """Delete it (and the turn's record); the deletion object."""

    async def input_items(self, identity: Identity, response_id: str, query: Mapping[str, str]) -> Json | None:
        """The page of its input items the query asks for (OpenAI's list object)."""

    async def list(self, identity: Identity, query: Mapping[str, str]) -> JsonObject:
        """The caller's responses, newest first unless asked otherwise."""

    async def close(self) -> None:
        """At shutdown: what the backend holds open (the engine's tools' connections)."""
