"""The start of a turn's life: `prepare()` validates everything, chooses the backend
once, and only then creates what the turn needs (an upstream conversation), so a
refused request leaves nothing behind. A `store: false` turn creates and records
nothing: it reads the history it continues (chained by `previous_response_id`) and
is forgotten.

The backend (forward to the upstream's Responses API, or the local engine over its
Chat Completions) is named here and in the wiring only: `BackendSelector` decides once
(for `llama_stack.api: auto` by asking the upstream on first use, so start-up never
waits for it) and every turn and stored-response read after that holds the chosen
`Backend`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Mapping

from gateway.compaction.items import has_compaction, is_compaction, open_compactions, opened
from gateway.compaction.seal import CompactionSeal
from gateway.config import Configuration
from gateway.config.access import Action
from gateway.identity import Identity
from gateway.identity.authorization import may_use_conversation
from gateway.quota.reservation import Reservation, context_estimate
from gateway.quota.service import QuotaService
from gateway.schema.errors import ApiError, conversation_forbidden, not_found
from gateway.schema.ids import (
    new_conversation_id, new_stored_conversation_id, openai_conversation_id, sent_form)
from gateway.schema.json_types import JsonObject
from gateway.turns.content import form_name
from gateway.schema.responses_request import ResponsesRequest, parse_responses_request, provider_data_header
from gateway.storage.conversation_items import ConversationItems
from gateway.storage.conversations import ConversationRecord, TurnRecord
from gateway.storage.history import expired
from gateway.storage.writer import TurnWriter
from gateway.turns.tools import ConfiguredTools
from gateway.turns.body import has_item_reference
from gateway.turns.in_progress import InProgress
from gateway.turns.model import ModelSelector
from gateway.turns.normalized import TurnInput, Rewrite, normalize
from gateway.turns.prompts import SystemPrompts
from gateway.turns.owned import OwnedTurns
from gateway.turns.shields import Shields
from gateway.turns.backend_choice import BackendSelector
from gateway.turns.blocked import BLOCKED_PREFIX, BlockedBackend
from gateway.turns.summary import TopicSummaries
from gateway.turns.turn import Backend, Outcome, PlanDraft, Turn, frozen
from gateway.upstream.catalog import ModelCatalog


# How many blocked turns in a row a chain walks back over (`Preparer._past_blocked`).
_MAX_BLOCKED_WALK = 50


class _Caller:
    """The default quota subject: the caller's own user id."""


CALLER: Any = _Caller()

# How an adapter records its question (`Plan.question`, `Plan.attachments`), from the
# input's user text after the redaction shields (a legacy query: its attachments apart).
Recorded = Callable[[str], tuple[str, tuple[dict[str, Any], ...]]]


@dataclass(frozen=True, slots=True)
class Checked:
    """What `Preparer.check()` found of one request body for one user: `prepare()` of
    that very body (the same object) for that user starts from it instead of checking
    it again (a WebSocket turn that runs as it arrives). Used once: `prepare()` changes
    the request."""
    raw: Any
    user_id: str
    given: Any
    opened_input: list[Any] | None
    request: ResponsesRequest
    shields: list[str]


class Preparer:
    def __init__(self, config: Configuration, turns: OwnedTurns, writer: TurnWriter,
                 catalog: ModelCatalog, quota: QuotaService, tools: ConfiguredTools,
                 backend: BackendSelector, items: ConversationItems | None = None,
                 compaction: CompactionSeal | None = None):
        self._turns = turns   # the recorded turns a request continues or forks from
        self._items = items   # what clients added to conversations the gateway keeps (issue 23)
        self._writer = writer
        self._models = ModelSelector(catalog, config.inference)
        self._quota = quota
        self._tools = tools
        self._prompts = SystemPrompts(config.customization)
        self._summaries = TopicSummaries(config.customization)
        self._shields = Shields(config)
        self.backend = backend
        self.in_progress = InProgress(config.service.max_responses_in_progress_per_user)
        self._idle_ttl = config.conversation_expiry.idle_ttl_seconds   # past it: unknown (expiry)
        self._conversation_form = config.service.conversation_form   # for conversations no client named
        # `compaction` input items: the one seal of the app (its keys set at start-up), else the configured keys.
        self._compaction = compaction or CompactionSeal(config.response_compaction.keys)

    def redacted(self, items: list[JsonObject]) -> list[JsonObject]:
        """Items added to a conversation through OpenAI's Conversations API, rewritten by
        every redaction shield (that API names none) before they are kept or relayed."""
        redacted: list[dict[str, Any]] = self._shields.redaction(self._shields.select(None))(items)
        return redacted

    async def prepare(self, identity: Identity, raw: Any, headers: Mapping[str, str],
                      prompt_field: str = "instructions", *, quota_subject: Any = CALLER,
                      server_prompt: str | None = None, shown_previous: str | None = None,
                      recorded: Recorded | None = None, checked: Checked | None = None) -> Turn:
        """`prompt_field`: what the client's request called its system prompt (the
        legacy endpoints' `system_prompt` arrives as `instructions`), named by LCORE's
        422 where the operator disabled them. `quota_subject`: whose balance admits and
        pays for the turn (the caller by default; None: no quota check, `/v1/infer`
        without `rlsapi_v1.quota_subject`). `server_prompt`: the system prompt the
        adapter made from the operator's (`/v1/infer`'s template), not the client's.
        `shown_previous`: the `previous_response_id` responses echo when the adapter
        sent another (the WebSocket's continuation: as the client named it).
        `recorded`: how the adapter records its question (a legacy query's
        attachments), for a stored turn.
        `checked`: what `check()` found of this `raw` for this caller (else it is checked
        here)."""
        # A `compaction` item becomes the user message of its summary before LCORE's
        # model reads the request (422 for one this caller cannot open).
        if checked is not None and checked.raw is raw and checked.user_id == identity.user_id:
            given, opened_input, request, shields = (checked.given, checked.opened_input, checked.request,
                                                     checked.shields)
        else:
            given, opened_input, request, shields = await self._checked(identity, raw)
        # The one input everything after reads (`turns/normalized.py`): opened, redacted,
        # its question the client's own words. From here on `raw` carries it: nothing is
        # left to read the client's text from.
        redact = self._shields.redaction(shields)
        given_input = normalize(given, opened_input, redact)
        del given, opened_input
        self._prompts.refuse_messages(given_input.items)   # no system prompt by another role
        raw = given_input.request(raw)
        self.in_progress.enter(identity.user_id)   # 429 past the operator's limit; left by the runner
        try:
            await self._writer.admit()
            tools = self._tools.for_request(raw.get("tools"), raw.get("tool_choice"), identity, headers)
            await self._tools.probe_oauth(raw.get("tools"), raw.get("tool_choice"), identity,
                                          headers)  # LCORE: before quota
            # LCORE's 429 before anything else is looked up; the context's share after.
            reservation = None if quota_subject is None else await self._quota.reserve(
                identity if quota_subject is CALLER else replace(identity, user_id=quota_subject), raw)
            try:
                turn = await self._prepare(identity, raw, request, tools, reservation, prompt_field, server_prompt,
                                           shields, given_input, redact, shown_previous, recorded,
                                           from_openai_sdk(headers))
            except BaseException:
                if reservation is not None:
                    await asyncio.shield(self._quota.release(reservation))
                raise
        except BaseException:
            self.in_progress.leave(identity.user_id)
            raise
        turn.in_progress = self.in_progress   # left by the runner
        return turn

    async def check(self, identity: Identity, raw: Any, prompt_field: str = "instructions") -> Checked:
        """Every refusal a request gets from itself alone (with the configuration and
        the caller): its `compaction` items, LCORE's request model (or what the backend
        accepts beyond it), `background` without `store`, its shields, its own system
        prompt (by `instructions` or by a message's role) where they are disabled, the
        tools it names (`ConfiguredTools.check`). `prepare()` makes the same checks, in
        LCORE's order; a transport that holds a request before preparing it (the
        WebSocket's queue) refuses it with this when it arrives, so nothing invalid
        waits. `raw` is left as it came; what was found is returned for `prepare()`."""
        given, opened_input, request, shields = await self._checked(identity, raw)
        self._tools.check(raw.get("tools"), raw.get("tool_choice"))
        self._prompts.check(request, prompt_field)
        self._prompts.refuse_messages(given if opened_input is None else opened_input)
        return Checked(raw, identity.user_id, given, opened_input, request, shields)

    async def _checked(self, identity: Identity, raw: Any) -> tuple[Any, list[Any] | None, ResponsesRequest, list[str]]:
        """The request's own refusals before anything is admitted: its input as the
        client sent it, that input with its compaction items opened (None: it held
        none), LCORE's request model, the shields it selects."""
        given = raw.get("input") if isinstance(raw, dict) else None
        opened_input = open_compactions(self._compaction, identity.user_id, given)
        request = await self._parse(raw if opened_input is None else {**raw, "input": opened_input})
        if request.background and not request.store:
            # OpenAI's rule: a background response is only ever read back, so it is stored.
            raise ApiError(400, "Invalid attribute value", "background: true requires store: true (a background "
                           "response is read back later)", code="invalid_value", param="background")
        # LCORE's shield checks.
        return given, opened_input, request, self._shields.select(request.shield_ids)

    async def _prepare(self, identity: Identity, raw: Any, request: ResponsesRequest, tools: list[JsonObject] | None,
                       reservation: Reservation | None, prompt_field: str, operator_prompt: str | None,
                       shields: list[str], given: TurnInput, redact: Rewrite, shown_previous: str | None,
                       recorded: Recorded | None, openai_sdk: bool) -> Turn:
        if operator_prompt is None:
            server_prompt = self._prompts.apply(request, prompt_field)   # LCORE: after the quota, before the conversation
        else:
            request.instructions, server_prompt = operator_prompt or None, bool(operator_prompt)
        existing, forked_from, previous = await self._resolve_conversation(identity, request)
        existing = await self._past_blocked(existing)
        model = await self._models.select(identity, request.model, existing)
        backend = await self.backend()
        await backend.check(raw, tools)
        # LCORE's question-validity shields, on the gateway's account (never charged). A
        # turn with no user text (tool outputs, approval answers) asks no question.
        asked = given.question if shields else ""
        blocked = await self._shields.judge(shields, asked, model.id, backend.summarize) if asked else None
        if reservation is not None:
            # The context the turn sends beyond its input, once known: reserved (or 429)
            # before anything is created.
            context = context_estimate(await self._previous_tokens(existing, forked_from, previous), tools)
            if context > 0:
                await self._quota.extend(reservation, context)

        # Everything is valid: now create what the turn needs.
        conversation_id, upstream_id = await self._conversation_for(backend, request, existing, forked_from)
        existing_kept = existing if forked_from is None else None
        append_to_upstream, appended_input, added_items = False, None, ()
        if request.store and upstream_id is not None and existing_kept is not None \
                and existing_kept.last_response_id and given.answers_approval:
            # Llama Stack finds the approval request only in the previous response, and
            # refuses previous_response_id together with conversation: chain this turn,
            # then append it to the conversation.
            append_to_upstream, appended_input = True, given.items
        added_input: tuple[dict[str, Any], ...] = ()
        if request.store and existing_kept is not None and self._items is not None:
            # Items added through the Conversations API since the last turn: this turn's
            # input, before the client's, in the order they were added. An upstream's
            # conversation keeps them under the ids the client was given (issue 41).
            added = await self._items.take_pending(existing_kept.id)
            if added:
                added = await self._opened_added(existing_kept, added)
                # They reach the model: redacted too.
                given = given.with_added(added, redact, keep_ids=upstream_id is not None)
                raw = given.request(raw)
                added_items = tuple(item["id"] for item in added)
                added_input = tuple(given.items[:len(added)])
                if append_to_upstream:
                    appended_input = given.items   # a chained turn appends them with its own
        if blocked is not None and request.store and upstream_id is not None:
            # A blocked turn is recorded like any (LCORE 0.6): where the upstream keeps
            # the conversation, the question and the shield's answer are appended to it.
            append_to_upstream, appended_input = True, given.items
        question: str = given.question if request.store else ""
        attachments: tuple[dict[str, Any], ...] = ()
        if recorded is not None and request.store:
            question, attachments = recorded(question)
        conversation_form = self._form(raw.get("conversation"), previous, openai_sdk)
        upstream_headers = ({} if request.solr is None
                            else {"X-LlamaStack-Provider-Data": provider_data_header(raw["solr"])})
        # The plan keeps what it needs from the request, not the validated model: it lives
        # as long as the stream, and memory per open stream is a budget. Its fields in
        # their order, positionally (a fenced speed trick: `turns/turn.py`, `PlanDraft`).
        plan = frozen(PlanDraft(
            identity,
            backend if blocked is None else BlockedBackend(backend, blocked),   # backend
            request.stream,
            request.previous_id if shown_previous is None else shown_previous,   # previous_response_id
            request.generate_topic_summary,
            upstream_headers,   # headers
            model,
            request.model or model.display_id,   # display_model
            conversation_id,
            upstream_id,   # upstream_conversation_id
            existing_kept,   # existing
            forked_from,
            request.store,
            bool(request.background),
            blocked,
            append_to_upstream,
            appended_input,
            reservation,
            None if reservation is None else partial(self._quota.extend, reservation),   # extend: the engine's rounds
            server_prompt,
            conversation_form,
            added_items,
            added_input,
            question,
            request.model,   # requested_model
            attachments))
        # What the backend is sent: the request's own `previous_response_id`, not the shown one.
        body = backend.body(raw, request, plan, tools)
        # A topic summary beside the turn, once its conversation exists (none for a blocked one).
        summary = None if blocked is not None else self._summaries.start(plan, given.question)
        # Its outcome starts as the plan says (positional: see `turns/turn.py`'s `plan()`).
        return Turn(plan, Outcome(plan.store, plan.append_to_upstream, plan.appended_input), body, summary)

    def _form(self, sent: Any, previous: TurnRecord | None, openai_sdk: bool) -> str:
        """The form responses show `conversation` in: the one the client named it in;
        for a turn continuing or forking by `previous_response_id` (`previous`, its
        record), the form of that turn (so the client that named a conversation keeps
        its form; the record's own column, not its content read again); else the
        operator's (`service.conversation_form`), which by default (`auto`) is the one
        the client expects: OpenAI's object for an OpenAI SDK, the string otherwise."""
        if sent is not None:
            return sent_form(sent)
        form = form_name(previous.conversation_form) if previous is not None else None
        if form is not None:
            return form
        if self._conversation_form == "auto":
            return "object" if openai_sdk else "string"
        return self._conversation_form

    async def _opened_added(self, conversation: ConversationRecord, added: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The added items with their `compaction` items opened for the conversation's
        owner (the item's id kept, to give it back). One that no longer opens (its key
        rotated out since it was added), or a `system` or `developer` message added
        before the operator disabled request system prompts, is a 422 naming it; the
        items are given back."""
        try:
            refused = self._prompts.stored_message(added)
            if refused is not None:
                raise refused
            if not has_compaction(added):
                return added
            return [{**opened(self._compaction, conversation.user_id, item, f"{item['id']} of the conversation",
                              "conversation"), "id": item["id"]} if is_compaction(item) else item for item in added]
        except ApiError:
            if self._items is not None:
                await self._items.restore(conversation.id, tuple(item["id"] for item in added))
            raise

    async def _past_blocked(self, existing: ConversationRecord | None) -> ConversationRecord | None:
        """A blocked turn's `modr-` response exists in no backend: a turn that would chain
        from one (`previous_response_id`: the engine, `store: false`) chains from the
        nearest turn before it that ran, or from nothing. The records keep their order
        (`prior_response_id` is the database's), so the history still shows it. (A
        client naming a `modr-` id itself is LCORE's 422, in the request model.)"""
        response_id = existing.last_response_id if existing is not None else None
        if existing is None or not response_id or not response_id.startswith(BLOCKED_PREFIX):
            return existing
        for _ in range(_MAX_BLOCKED_WALK):
            found = await self._turns.turn(response_id)
            response_id = found[0].prior_response_id if found is not None else None
            if response_id is None or not response_id.startswith(BLOCKED_PREFIX):
                break
        else:
            response_id = None
        return replace(existing, last_response_id=response_id)

    async def _previous_tokens(self, existing: ConversationRecord | None, forked_from: str | None,
                               named: TurnRecord | None) -> int:
        """The reported input + output tokens of the turn this one continues (its
        context, sent again), as its record keeps them; 0 for a new conversation.
        `named`: the record of the turn the request named by `previous_response_id`,
        already read (not read again when it is that turn)."""
        previous = forked_from or (existing.last_response_id if existing is not None else None)
        if not previous:
            return 0
        if named is not None and named.response_id == previous:
            return named.tokens
        return await self._turns.tokens(previous)

    async def _parse(self, raw: Any) -> ResponsesRequest:
        """LCORE's request model; what a backend accepts beyond it (the engine:
        `item_reference` input items). Only a request LCORE's model refuses and that
        holds such an item asks which backend runs the turn first, so forward mode keeps
        LCORE's exact 422 bodies and a refusal never waits for the upstream."""
        try:
            return parse_responses_request(raw, self._tools.server_urls)
        except ApiError as refusal:
            if not has_item_reference(raw):
                raise
            return await (await self.backend()).accept(raw, refusal)

    async def _conversation_for(self, backend: Backend, request: ResponsesRequest, existing: ConversationRecord | None,
                                forked_from: str | None) -> tuple[str | None, str | None]:
        """The conversation this turn belongs to (bare id) and the backend's id for it."""
        if existing is not None and forked_from is None:
            return existing.id, existing.upstream_id
        if not request.store:
            return None, None  # a fork or a new conversation that would be stored: none
        if forked_from is not None:
            # A fork is continued by chaining previous_response_id, which replays the
            # whole context upstream; Llama Stack's API cannot give a new conversation
            # the ordered history up to the fork point.
            return new_conversation_id(), None
        upstream_id = await backend.create_conversation()
        return new_stored_conversation_id(upstream_id), upstream_id

    async def _resolve_conversation(self, identity: Identity, request: ResponsesRequest,
                                    ) -> tuple[ConversationRecord | None, str | None, TurnRecord | None]:
        """The conversation this turn continues (None: a new one), the response it forks
        from, and the record of the turn named by `previous_response_id` (if any)."""
        if request.conversation_id is not None:
            existing = await self._turns.conversation(request.conversation_id)
            if existing is None or (self._idle_ttl and expired(existing.last_message_at, self._idle_ttl)):
                raise not_found("Conversation", request.conversation_id, code="conversation_not_found",
                                param="conversation")
            if not may_use_conversation(identity, existing.user_id, Action.QUERY_OTHERS_CONVERSATIONS):
                # LCORE's body (which says `read`, and names the id as /v1/responses
                # returns it: `conv_<48 hex>`); the turn continues the owner's
                # conversation, which stays theirs (its responses too).
                raise conversation_forbidden(identity.user_id, openai_conversation_id(request.conversation_id))
            return existing, None, None
        previous = request.previous_id
        if previous is None:
            return None, None, None
        found = await self._turns.turn(previous)
        if found is None or found[1].user_id != identity.user_id or (
                self._idle_ttl and expired(found[1].last_message_at, self._idle_ttl)):
            raise not_found("Response", previous, code="response_not_found", param="previous_response_id")
        # A later turn of this conversation may still be being recorded: whether this one
        # is the latest (continue) or not (fork) depends on it.
        conversation = await self._turns.latest(found[1])
        return conversation, None if conversation.last_response_id == previous else previous, found[0]


def from_openai_sdk(headers: Mapping[str, str]) -> bool:
    """Whether a request comes from one of OpenAI's SDKs (Stainless-generated: Python,
    Node, Go, ... all send `X-Stainless-Lang`; their user agents start `OpenAI/`), which
    type `conversation` as an object. LCORE's clients send neither."""
    return "X-Stainless-Lang" in headers or headers.get("User-Agent", "").startswith("OpenAI/")
