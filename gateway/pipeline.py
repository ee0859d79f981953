"""The per-turn decisions every endpoint shares: `prepare()`, `settle()`, `finish()`.

`prepare()` validates everything first (request, conversation ownership, model) and
only then creates what the turn needs (an upstream conversation), so a refused
request leaves nothing behind. A `store: false` turn creates and records nothing: it
reads the history it continues (chained by `previous_response_id`) and is forgotten.
`settle()` runs before the terminal event or JSON body is written: it consumes the
turn's tokens and commits the turn's record (group-committed with concurrent turns by
`TurnWriter`), so whatever replica the client continues on finds it (DESIGN decision
4); it still completes when the client has gone away, and a request in this process
about the same conversation or response that arrives meanwhile waits for it.
`finish()` runs after the response.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from typing import Any, Mapping

import orjson

from gateway.config import Configuration
from gateway.config_access import Action
from gateway.engine.backend import LocalEngine
from gateway.identity import Identity
from gateway.identity.authorization import may_use_conversation
from gateway.model_selection import ModelSelector
from gateway.quota.reservation import Charge, Reservation
from gateway.quota.service import QuotaService
from gateway.schema.errors import ApiError, conversation_forbidden, database_error, invalid_attribute, not_found
from gateway.schema.ids import new_conversation_id, normalize_conversation_id, openai_conversation_id
from gateway.schema.responses import ResponsesRequest, parse_responses_request
from gateway.storage.conversations import ConversationRecord, ConversationRepository, TurnRecord
from gateway.storage.writer import TurnWriter
from gateway.streaming.enrich import Enricher
from gateway.tools import ConfiguredTools
from gateway.turn import Backend, Turn  # noqa: F401 (Turn re-exported: the pipeline's unit of work)
from gateway.turn_body import answers_approval, backend_body, has_item_reference, input_items
from gateway.upstream.catalog import ModelCatalog
from gateway.upstream.responses import UpstreamResponses

log = logging.getLogger("gateway.pipeline")

# Llama Stack's add-items endpoint, like OpenAI's, takes at most this many items a call.
_ITEMS_PER_CALL = 20
# requires_action: a local-engine response waiting for the client's function results.
_RECORDED_STATUSES = ("completed", "incomplete", "requires_action")


def _now() -> str:
    return _iso(time.time())


def _iso(seconds: float) -> str:
    """ISO-8601 UTC with microseconds, as `datetime.isoformat()` writes it."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


class Pipeline:
    def __init__(self, config: Configuration, conversations: ConversationRepository, writer: TurnWriter,
                 backend: UpstreamResponses, catalog: ModelCatalog, quota: QuotaService, tools: ConfiguredTools,
                 engine: LocalEngine | None = None):
        self._config = config
        self._conversations = conversations
        self._writer = writer
        # The two backends (DESIGN: one interface, two implementations): the upstream's
        # Responses API (forward), or the local engine over its Chat Completions.
        self.backend = backend
        self.engine = engine
        self._models = ModelSelector(catalog, config.inference)
        self._quota = quota
        self._tools = tools
        self._pending: dict[str, asyncio.Future] = {}   # conversation / response id -> its recording
        self._background: set[asyncio.Future] = set()

    async def prepare(self, identity: Identity, raw: Any, headers: Mapping[str, str]) -> Turn:
        request = await self._parse(raw)
        if request.background and not request.store:
            # OpenAI's rule: a background response is only ever read back, so it is stored.
            raise ApiError(400, "Invalid attribute value", "background: true requires store: true (a background "
                           "response is read back later)", code="invalid_value", param="background")
        if request.shield_ids:
            raise invalid_attribute(f"Unknown shield IDs: {', '.join(request.shield_ids)} (this gateway has no "
                                    "shields configured)", param="shield_ids", code="shield_not_found")
        await self._writer.admit()
        tools = self._tools.for_request(raw.get("tools"), raw.get("tool_choice"), identity, headers)
        await self._tools.probe_oauth(raw.get("tools"), raw.get("tool_choice"), headers)  # LCORE: before quota
        reservation = await self._quota.reserve(identity, raw)  # 429 before anything else is looked up
        try:
            return await self._prepare(identity, raw, request, tools, reservation)
        except BaseException:
            if reservation is not None:
                await asyncio.shield(self._quota.release(reservation))
            raise

    async def _prepare(self, identity: Identity, raw: Any, request: ResponsesRequest, tools: list[dict[str, Any]] | None,
                       reservation: Reservation | None) -> Turn:
        existing, forked_from = await self._resolve_conversation(identity, request)
        model = await self._models.select(identity, request.model, existing)
        engine = await self.uses_engine()
        if engine:
            assert self.engine is not None
            self.engine.check({**raw, "tools": tools})
        else:
            await self._tools.check_client_servers(tools)  # the upstream will connect: judge the names now

        # Everything is valid: now create what the turn needs.
        conversation_id, upstream_id = await self._conversation_for(request, existing, forked_from, engine)
        # The turn keeps what it needs from the request, not the validated model: it lives
        # as long as the stream, and memory per open stream is a budget.
        turn = Turn(identity=identity, stream=request.stream, previous_response_id=request.previous_id,
                    generate_topic_summary=request.generate_topic_summary, body={}, headers={}, model=model,
                    display_model=request.model or model.display_id, conversation_id=conversation_id,
                    upstream_conversation_id=upstream_id, existing=existing if forked_from is None else None,
                    forked_from=forked_from, store=request.store, engine=engine, reservation=reservation,
                    background=bool(request.background))
        if request.store and upstream_id is not None and turn.existing is not None \
                and turn.existing.last_response_id and answers_approval(raw["input"]):
            # Llama Stack finds the approval request only in the previous response, and
            # refuses previous_response_id together with conversation: chain this turn,
            # then append it to the conversation.
            turn.append_to_upstream = True
            turn.appended_input = raw["input"]
        turn.body = backend_body(raw, request, turn, tools, self._config.inference,
                                 self.backend.capabilities.is_llama_stack)
        if request.solr is not None:
            turn.headers["X-LlamaStack-Provider-Data"] = orjson.dumps({"solr": raw["solr"]}).decode()
        return turn

    def backend_of(self, turn: Turn) -> Backend:
        if turn.engine:
            assert self.engine is not None
            return self.engine
        return self.backend

    async def _parse(self, raw: Any) -> ResponsesRequest:
        """LCORE's request model; on the local engine, `item_reference` input items too.
        Only a request LCORE's model refuses and that holds such an item asks which backend
        runs the turn first, so forward mode keeps LCORE's exact 422 bodies."""
        try:
            return parse_responses_request(raw, self._tools.server_urls)
        except ApiError:
            if not has_item_reference(raw) or not await self.uses_engine():
                raise
        return parse_responses_request(raw, self._tools.server_urls, engine=True)

    async def uses_engine(self) -> bool:
        """Whether turns run on the local engine (learnt from the upstream once, for `auto`)."""
        return self.engine is not None and await self.backend.capabilities.uses_engine()

    async def _conversation_for(self, request: ResponsesRequest, existing: ConversationRecord | None,
                                forked_from: str | None, engine: bool) -> tuple[str | None, str | None]:
        """The conversation this turn belongs to (bare id) and its upstream id."""
        if existing is not None and forked_from is None:
            return existing.id, existing.upstream_id
        if not request.store:
            return None, None  # a fork or a new conversation that would be stored: none
        if forked_from is not None:
            # A fork is continued by chaining previous_response_id, which replays the
            # whole context upstream; Llama Stack's API cannot give a new conversation
            # the ordered history up to the fork point.
            return new_conversation_id(), None
        if engine:
            # The engine keeps the conversation: its turns chain by previous_response_id.
            return new_conversation_id(), None
        upstream_id = await self.backend.create_conversation()
        conversation_id = normalize_conversation_id(upstream_id) if upstream_id else new_conversation_id()
        return conversation_id, upstream_id

    def enricher(self, turn: Turn) -> Enricher:
        """What every response object of this turn gets (JSON body or stream events)."""
        return Enricher(turn.conversation, turn.previous_response_id, turn.display_model, self._tools.labels,
                        turn.background)

    def stored_enricher(self, record: TurnRecord) -> Enricher:
        """What a stored response gets when it is read back (`GET /v1/responses/{id}`)."""
        return Enricher(openai_conversation_id(record.conversation_id), record.previous_response_id,
                        configured_labels=self._tools.labels)

    async def settle(self, turn: Turn) -> dict[str, int]:
        """Before the terminal event or body: charge the turn's tokens and commit its
        record (group-committed with concurrent turns; after appending it to the upstream
        conversation when it was chained), once. Returns the balance after it
        (`available_quotas`). A client that is then told the turn is done can continue it
        at once on any replica. Raises `database_error()` when the record cannot be
        committed: the client is not told the turn is done."""
        if turn.quotas is not None:
            return turn.quotas
        if not turn.store and not self._quota.enabled:
            turn.quotas = {}
            return turn.quotas
        if turn._settling is None:
            # Shielded below: a client that leaves mid-settle must not undo the charge or
            # lose the record.
            turn._settling = self._submitted(turn) or asyncio.ensure_future(self._settle(turn))
            self._track(turn, turn._settling)
        try:
            quotas = await asyncio.shield(turn._settling)
        except ApiError:
            raise
        except Exception:  # the writer logged it
            raise database_error() from None
        if quotas is None and turn.reservation is not None:   # the writer's future: the charge is committed
            quotas = await self._balances_after_charge(turn)
        turn.quotas = quotas or {}
        return turn.quotas

    def _submitted(self, turn: Turn) -> asyncio.Future | None:
        """The common turn's settling without a task of its own (a few µs a turn): its
        record, with its charge when the quota storage is the turn database, handed to
        the writer at once; the writer's future. None: `_settle()` it is."""
        if turn.append_to_upstream or turn.result is None:
            return None
        if turn.reservation is None:
            return self._writer.submit(*self._records(turn))
        if not (turn.store and self._quota.shares_turn_database):
            return None
        return self._writer.submit(*self._records(turn), charge=self._charge(turn))   # failed: `_finished`

    async def _balances_after_charge(self, turn: Turn) -> dict[str, int]:
        """`available_quotas` once the turn's charge is committed: without I/O nearly
        always (`QuotaService.settled`), else read."""
        assert turn.reservation is not None
        quotas = self._quota.settled(turn.reservation)
        return quotas if quotas is not None else await self._quota.available(turn.identity.user_id)

    def _charge(self, turn: Turn) -> Charge:
        """The charge of a turn with a result: the upstream's input + output tokens; a
        turn its client stopped with no usage (a cancelled background one) is charged
        its reservation, as an abandoned stream is."""
        assert turn.reservation is not None and turn.result is not None
        usage = turn.result.get("usage") or {}
        spent = (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)) \
            if usage or not turn.abandoned else (turn.reservation.tokens, 0)
        return self._quota.charge(turn.reservation, *spent, turn.model.id, turn.model.provider_id)

    async def _settle(self, turn: Turn) -> dict[str, int]:
        """The charge (the upstream's input + output tokens to every limiter, releasing
        the reservation) and the record: one transaction when the quota storage is the
        turn database, else the charge first, then the record."""
        charge = self._charge(turn) if turn.reservation is not None and turn.result is not None else None
        try:
            if turn.store and turn.result is not None:
                if turn.append_to_upstream and turn.result.get("status") in _RECORDED_STATUSES:
                    await self._append_turn(turn)
                if charge is not None and not self._quota.shares_turn_database:
                    await self._quota.write(charge)
                    charge = None
                await self._writer.submit(*self._records(turn), charge=charge)
                if charge is not None:
                    return await self._balances_after_charge(turn)
            elif charge is not None:
                await self._quota.write(charge)
        except BaseException:
            self._quota.forget(turn.reservation)   # what the ledger assumed was not written
            raise
        return await self._quota.available(turn.identity.user_id) if turn.reservation is not None else {}

    def finish(self, turn: Turn) -> None:
        """After the response: a turn that reached its terminal event is settled even if
        the handler never got to it (background; `drain()` waits for it). A turn that
        never got the upstream's usage ends its reservation: charged in full when the
        client abandoned it (aborting is no way around a quota), else released."""
        if turn._settling is not None:
            return
        if turn.result is None:
            if turn.reservation is not None:
                done = asyncio.ensure_future(self._quota.release(
                    turn.reservation, turn.reservation.tokens if turn.abandoned else 0))
                turn._settling = done
                self._background.add(done)
                done.add_done_callback(lambda future: self._finished(future, (None, "")))
            return
        if not turn.store and turn.reservation is None:
            return
        turn._settling = asyncio.ensure_future(self._settle(turn))
        self._track(turn, turn._settling)

    def _track(self, turn: Turn, done: asyncio.Future) -> None:
        """Requests about this conversation or response wait for its record (in-process:
        another replica only sees it committed, which happens before the client is told)."""
        keys = (turn.conversation_id, str((turn.result or {}).get("id")))
        for key in keys:
            if key:
                self._pending[key] = done
        self._background.add(done)
        done.add_done_callback(lambda future: self._finished(future, keys, turn.reservation))

    def _finished(self, future: asyncio.Future, keys: tuple[str | None, str],
                  reservation: Reservation | None = None) -> None:
        self._background.discard(future)
        for key in keys:
            if key and self._pending.get(key) is future:
                del self._pending[key]
        if future.cancelled() or future.exception() is not None:
            # The writer logged a failure and settle() told the client; a charge that
            # was not written is not assumed by SQLite's ledger either.
            self._quota.forget(reservation)

    async def drain(self) -> None:
        """Wait until every finished turn is recorded (at shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def _records(self, turn: Turn) -> tuple[ConversationRecord, TurnRecord | None]:
        response = turn.result
        assert response is not None and turn.conversation_id is not None
        completed_at = _now()
        started_at = _iso(turn.started)
        conversation = ConversationRecord(
            id=turn.conversation_id, user_id=turn.identity.user_id, upstream_id=turn.upstream_conversation_id,
            created_at=started_at, last_message_at=completed_at, last_used_model=turn.model.id,
            last_used_provider=turn.model.provider_id, last_response_id=None, message_count=0, topic_summary="",
            generate_topic_summary=turn.generate_topic_summary is not False and turn.existing is None)
        if response.get("status") not in _RECORDED_STATUSES or not isinstance(response.get("id"), str):
            return conversation, None  # a failed turn: the conversation exists, the turn does not count
        return conversation, TurnRecord(
            conversation_id=turn.conversation_id, response_id=response["id"],
            previous_response_id=turn.previous_response_id, model=turn.model.id,
            provider=turn.model.provider_id, status=response["status"], started_at=started_at,
            completed_at=completed_at)

    async def _append_turn(self, turn: Turn) -> None:
        """A turn sent with previous_response_id in a conversation the upstream keeps:
        add its input and output to that conversation, as `conversation` would have."""
        assert turn.result is not None and turn.upstream_conversation_id is not None
        items = input_items(turn.appended_input) + [
            item for item in turn.result.get("output") or [] if isinstance(item, dict)]
        items = [{key: value for key, value in item.items() if value is not None} for item in items]
        for start in range(0, len(items), _ITEMS_PER_CALL):
            await self.backend.append_items(turn.upstream_conversation_id, items[start:start + _ITEMS_PER_CALL])

    async def owned_turn(self, identity: Identity, response_id: str) -> TurnRecord | None:
        """The recorded turn behind a response id, if it belongs to the caller."""
        await self._wait_pending(response_id)
        found = await self._conversations.find_turn(response_id)
        if found is None or found[1].user_id != identity.user_id:
            return None
        return found[0]

    async def _wait_pending(self, key: str | None) -> None:
        task = self._pending.get(key) if key else None
        if task is not None and not task.done():
            # Shielded: a request that is cancelled while it waits must not cancel the
            # recording it waits for. Its failure is logged where it is recorded.
            try:
                await asyncio.shield(task)
            except Exception:
                pass

    async def _resolve_conversation(self, identity: Identity, request: ResponsesRequest,
                                    ) -> tuple[ConversationRecord | None, str | None]:
        """The conversation this turn continues (None: a new one), and the response it forks from."""
        if request.conversation_id is not None:
            await self._wait_pending(request.conversation_id)
            existing = await self._conversations.get(request.conversation_id)
            if existing is None:
                raise not_found("Conversation", request.conversation_id, code="conversation_not_found",
                                param="conversation")
            if not may_use_conversation(identity, existing.user_id, Action.QUERY_OTHERS_CONVERSATIONS):
                # LCORE's body (which says `read`); the turn continues the owner's
                # conversation, which stays theirs (its responses too).
                raise conversation_forbidden(identity.user_id, request.conversation_id)
            return existing, None
        previous = request.previous_id
        if previous is None:
            return None, None
        await self._wait_pending(previous)
        found = await self._conversations.find_turn(previous)
        if found is None or found[1].user_id != identity.user_id:
            raise not_found("Response", previous, code="response_not_found", param="previous_response_id")
        conversation = found[1]
        if conversation.id in self._pending:
            # A later turn of this conversation is still being recorded: whether this one
            # is the latest (continue) or not (fork) depends on it.
            await self._wait_pending(conversation.id)
            conversation = await self._conversations.get(conversation.id) or conversation
        return conversation, None if conversation.last_response_id == previous else previous
