"""The end of a turn's life: `settle()` before the terminal event or JSON body,
`finish()` after the response, and the registry of turns still being recorded.

`settle()` records how the turn ended (its `Outcome`: the Settler is the only writer of
it) and charges the turn's tokens and commits its record (group-committed with
concurrent turns by `TurnWriter`), so whatever replica the client continues on finds
it (docs/architecture.md, "A turn's life": `Settler.settle`); it still completes
when the client has gone away, and a
request in this process about the same conversation or response that arrives
meanwhile waits for it (`wait_pending()`). `finish()` settles a turn its caller did
not (it ended without a terminal event, or the client left), charging an abandoned
turn what it used (`Turn.stopped_charge`): aborting is no way around a quota.
`abandon()`, `stopping()` and `interrupted()` are the other endings the outcome records
(the client left; the client stops a stream and keeps what it got). Reading what was
recorded is `OwnedTurns`' (`turns/owned.py`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from datetime import datetime, timezone
from typing import Any

from gateway.quota.reservation import Charge, Reservation
from gateway.quota.service import QuotaService
from gateway.schema.errors import ApiError, database_error
from gateway.schema.json_types import JsonObject
from gateway.storage.conversation_items import ConversationItems
from gateway.storage.conversations import ConversationRecord, TurnRecord
from gateway.storage.writer import TurnWriter
from gateway.turns.body import input_items
from gateway.turns.content import form_code, turn_content
from gateway.turns.summary import summary_of
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.turns")

# Llama Stack's add-items endpoint, like OpenAI's, takes at most this many items a call.
_ITEMS_PER_CALL = 20
# requires_action: a local-engine response waiting for the client's function results.
_RECORDED_STATUSES = ("completed", "incomplete", "requires_action")


def _made_summary(turn: Turn) -> str:
    """The turn's topic summary, made by now (`summary_of()` waited for it), or ""."""
    made = turn.summary
    if made is None or not made.done() or made.cancelled() or made.exception() is not None:
        return ""
    return made.result()


def _reported(response: dict[str, Any]) -> int:
    """The input + output tokens the upstream reported for a turn (the next turn of its
    conversation sends them again: its quota estimate counts them)."""
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return 0
    return int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)


def _now() -> str:
    return _iso(time.time())


# speed: `_iso` formats the date and time once a second: ~9.5k instructions fewer a call,
# two calls a turn (bench/README.md "The hot path's tricks"). Plain version:
# `datetime.fromtimestamp(seconds, timezone.utc).isoformat()`.
# The last whole second `_iso` formatted, and its text.
_second: tuple[float, str] = (-1.0, "")


def _iso(seconds: float) -> str:
    """ISO-8601 UTC with microseconds, exactly as `datetime.fromtimestamp(seconds,
    timezone.utc).isoformat()` writes it (no fraction when it is zero). The microseconds
    are rounded as datetime rounds them (half to even, carried into the second)."""
    global _second
    fraction, whole = math.modf(seconds)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        micro -= 1_000_000
        whole += 1.0
    elif micro < 0:
        micro += 1_000_000
        whole -= 1.0
    if whole != _second[0]:
        _second = (whole, datetime.fromtimestamp(whole, timezone.utc).isoformat()[:-6])
    return f"{_second[1]}.{micro:06d}+00:00" if micro else f"{_second[1]}+00:00"


class Settler:
    def __init__(self, writer: TurnWriter, quota: QuotaService, items: ConversationItems | None = None):
        self._writer = writer
        self._quota = quota
        self._items = items   # where a turn that is not recorded gives back the items it took
        self._pending: dict[str, asyncio.Future[Any]] = {}   # conversation / response id -> its recording
        self._background: set[asyncio.Future[Any]] = set()

    async def settle(self, turn: Turn, result: JsonObject | None = None, recorded: bool = True,
                     abandoned: bool | None = None) -> dict[str, int]:
        """Before the terminal event or body: record how the turn ended (`result`, its
        terminal response object; `recorded=False`: its caller
        answers it as an error, charged but not recorded; `abandoned`: whether its
        client stopped it), charge the turn's tokens and commit its record
        (group-committed with concurrent turns; after appending it to the upstream
        conversation when it was chained), once. Returns the balance after it
        (`available_quotas`). A client that is then told the turn is done can continue it
        at once on any replica. Raises `database_error()` when the record cannot be
        committed: the client is not told the turn is done."""
        outcome = turn.outcome
        if result is not None:
            outcome.result = result
        if not recorded:
            outcome.recorded = False
        if abandoned is not None:
            outcome.abandoned = abandoned
        if outcome.quotas is not None:
            return outcome.quotas
        if not outcome.recorded and turn.plan.reservation is None:
            # Nothing to record, nothing to charge (no quotas, or an adapter that checks
            # none: `/v1/infer` without `rlsapi_v1.quota_subject`).
            outcome.quotas = {}
            return outcome.quotas
        if outcome.settling is None:
            # Shielded below: a client that leaves mid-settle must not undo the charge or
            # lose the record.
            outcome.settling = self._submitted(turn) or asyncio.ensure_future(self._settle(turn))
            self._track(turn, outcome.settling)
        try:
            quotas = await asyncio.shield(outcome.settling)
        except ApiError:
            raise
        except Exception:  # the writer logged it
            raise database_error() from None
        reservation = turn.plan.reservation
        if quotas is None and reservation is not None:   # the writer's future: the charge is committed
            quotas = await self._balances_after_charge(reservation)
        outcome.quotas = quotas or {}
        return outcome.quotas

    def _submitted(self, turn: Turn) -> asyncio.Future[Any] | None:
        """The common turn's settling without a task of its own (a few µs a turn): its
        record, with its charge when the quota storage is the turn database, handed to
        the writer at once; the writer's future. None: `_settle()` it is."""
        outcome = turn.outcome
        if outcome.append_to_upstream or outcome.result is None or (turn.summary is not None
                                                                     and not turn.summary.done()):
            return None
        if turn.plan.reservation is None:
            return self._writer.submit(*self._records(turn))
        if not (outcome.recorded and self._quota.shares_turn_database):
            return None
        return self._writer.submit(*self._records(turn), charge=self._charge(turn))   # failed: `_finished`

    async def _balances_after_charge(self, reservation: Reservation) -> dict[str, int]:
        """`available_quotas` once the turn's charge is committed: without I/O nearly
        always (`QuotaService.settled`), else read."""
        quotas = self._quota.settled(reservation)
        # The reservation's subject: the caller, or whom the adapter charges (`/v1/infer`).
        return quotas if quotas is not None else await self._quota.available(reservation.user_id)

    def _charge(self, turn: Turn) -> Charge:
        """The charge of a turn with a result: the upstream's input + output tokens; a
        turn its client stopped (a cancelled background one) as an abandoned one is
        (`Turn.stopped_charge`), whatever usage its result shows so far, and so is one
        whose stream broke before the upstream reported usage (it received the turn)."""
        plan, outcome = turn.plan, turn.outcome
        assert plan.reservation is not None and outcome.result is not None
        if outcome.abandoned or outcome.unreported:
            output = int(turn.usage.get("output_tokens") or 0) if turn.usage else 0
            spent = (turn.stopped_charge() - output, output)
        else:
            usage = outcome.result.get("usage") or {}
            spent = (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
        return self._quota.charge(plan.reservation, *spent, plan.model.id, plan.model.provider_id)

    async def _settle(self, turn: Turn) -> dict[str, int]:
        """The charge (the upstream's input + output tokens to every limiter, releasing
        the reservation) and the record: one transaction when the quota storage is the
        turn database, else the charge first, then the record."""
        outcome, reservation = turn.outcome, turn.plan.reservation
        charge = self._charge(turn) if reservation is not None and outcome.result is not None else None
        try:
            if outcome.recorded and outcome.result is not None:
                await summary_of(turn)   # committed with the record (started with the turn, so rarely awaited)
                if outcome.append_to_upstream and outcome.result.get("status") in _RECORDED_STATUSES:
                    await self._append_turn(turn)
                if charge is not None and not self._quota.shares_turn_database:
                    await self._quota.write(charge)
                    charge = None
                await self._writer.submit(*self._records(turn), charge=charge)
                if charge is not None and reservation is not None:
                    return await self._balances_after_charge(reservation)
            elif charge is not None:
                await self._quota.write(charge)
        except BaseException:
            self._quota.forget(reservation)   # what the ledger assumed was not written
            raise
        return await self._quota.available(reservation.user_id) if reservation is not None else {}

    def finish(self, turn: Turn) -> None:
        """After the response: a turn that reached its terminal event is settled even if
        the handler never got to it (background; `drain()` waits for it). A turn that
        never got a terminal response ends its reservation: charged as a stopped turn
        when the client abandoned it (aborting is no way around a quota: the rounds it
        used, the one in flight, at least its reservation), else what the engine's
        finished rounds reported."""
        plan, outcome = turn.plan, turn.outcome
        if plan.added_items:
            self.give_back(turn)   # it ended without settling (refused by the backend, cancelled)
        if outcome.settling is not None:
            return
        if outcome.result is None:
            if turn.summary is not None:
                turn.summary.cancel()   # no record to put it in
            if plan.reservation is not None:
                done = asyncio.ensure_future(self._quota.release(
                    plan.reservation, turn.stopped_charge() if outcome.abandoned or outcome.unreported else turn.used))
                outcome.settling = done
                self._background.add(done)
                done.add_done_callback(lambda future: self._finished(future, (None, "")))
            return
        if not outcome.recorded and plan.reservation is None:
            return
        outcome.settling = asyncio.ensure_future(self._settle(turn))
        self._track(turn, outcome.settling)

    @staticmethod
    def abandon(turn: Turn) -> None:
        """Its client left before the answer (`run.client_left`): `finish()` charges it as
        a stopped turn."""
        turn.outcome.abandoned = True

    @staticmethod
    def unreported(turn: Turn) -> None:
        """The upstream received it, then its stream broke (reset, idle gap, cut, the
        shutdown's grace over) before it reported usage: charged as a stopped turn."""
        turn.outcome.unreported = True

    @staticmethod
    def stopping(turn: Turn, reason: str | None) -> None:
        """Before its stream is cancelled: its client stops it and keeps what it got
        (`reason`, the partial response's; None: it does not, after all). The engine
        saves the partial response (`incomplete`, with this reason); `interrupted()`
        records it."""
        turn.outcome.stopped_reason = reason

    def interrupted(self, turn: Turn, partial: JsonObject | None, appended_input: Any) -> None:
        """A stream its user interrupted (LCORE's `/v1/streaming_query/interrupt`), before
        `finish()`: recorded with its partial answer (`partial`, the response object so
        far, under its id; None: there is none, it ends as any abandoned turn without a
        result) and charged as an abandoned turn (`Turn.stopped_charge`). Where the
        upstream keeps the conversation, `appended_input` and the partial answer are
        added to it (as a chained turn's are, `_append_turn`); the local engine saved
        the partial response itself (`stopping()`), so the next turn's
        `previous_response_id` continues from it. A turn that already has its result
        ended otherwise and is left as it is."""
        outcome = turn.outcome
        if outcome.result is not None or partial is None:
            return
        outcome.result = partial
        outcome.abandoned = True
        plan = turn.plan
        if plan.upstream_conversation_id is not None:
            outcome.append_to_upstream = True
            # The items it took from the conversation go with it (`give_back` discards them).
            outcome.appended_input = [*plan.added_input, *input_items(appended_input)] if plan.added_input \
                else appended_input

    def give_back(self, turn: Turn) -> None:
        """Items clients added to a conversation go with its next turn (`Preparer` takes
        them); a turn that ends without being recorded (failed, cancelled, abandoned
        before its end) gives them back, once, so the turn after it sends them, as
        OpenAI's conversation still holds them (issue 23). A recorded turn of an
        upstream's conversation left them there: the gateway's copies go (issue 41).
        Called when the turn is settled (before its client is told it failed) and when it
        finishes; the usual turn took none and never gets here."""
        plan, outcome = turn.plan, turn.outcome
        if not plan.added_items or outcome.gave_back or plan.conversation_id is None or self._items is None:
            return
        try:
            result = outcome.result
            if result is not None and result.get("status") in _RECORDED_STATUSES:
                if plan.upstream_conversation_id is not None:
                    outcome.gave_back = True   # once (discarded: the upstream's conversation has them)
                    done = asyncio.ensure_future(self._items.discard(plan.conversation_id, plan.added_items))
                    self._background.add(done)   # `drain()` waits for it
                    done.add_done_callback(self._background.discard)
                    done.add_done_callback(_discarded)
                return
            outcome.gave_back = True   # once
            self._items.restore_soon(plan.conversation_id, plan.added_items).add_done_callback(_logged)
        except Exception:   # never fails the turn: they stay taken (still listed)
            log.exception("giving back the items of a failed turn failed")

    def _track(self, turn: Turn, done: asyncio.Future[Any]) -> None:
        """Requests about this conversation or response wait for its record (in-process:
        another replica only sees it committed, which happens before the client is told)."""
        keys = (turn.plan.conversation_id, str((turn.outcome.result or {}).get("id")))
        for key in keys:
            if key:
                self._pending[key] = done
        self._background.add(done)
        done.add_done_callback(lambda future: self._finished(future, keys, turn.plan.reservation))

    def _finished(self, future: asyncio.Future[Any], keys: tuple[str | None, str],
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
        plan, response = turn.plan, turn.outcome.result
        assert response is not None and plan.conversation_id is not None
        completed_at = _now()
        started_at = _iso(plan.started)
        model = plan.model
        conversation = ConversationRecord(
            id=plan.conversation_id, user_id=plan.identity.user_id, upstream_id=plan.upstream_conversation_id,
            created_at=started_at, last_message_at=completed_at, last_used_model=model.id,
            last_used_provider=model.provider_id, last_response_id=None, message_count=0,
            topic_summary=_made_summary(turn),
            generate_topic_summary=plan.generate_topic_summary is not False and plan.existing is None)
        if response.get("status") not in _RECORDED_STATUSES or not isinstance(response.get("id"), str):
            return conversation, None  # a failed turn: the conversation exists, the turn does not count
        return conversation, TurnRecord(
            conversation_id=plan.conversation_id, response_id=response["id"],
            previous_response_id=plan.previous_response_id, model=model.id,
            provider=model.provider_id, status=response["status"], started_at=started_at,
            completed_at=completed_at, tokens=_reported(response),
            content=turn_content(plan.question, response, plan.conversation_form),
            conversation_form=form_code(plan.conversation_form))

    async def _append_turn(self, turn: Turn) -> None:
        """A turn sent with previous_response_id in a conversation the upstream keeps:
        add its input and output to that conversation, as `conversation` would have."""
        plan, outcome = turn.plan, turn.outcome
        assert outcome.result is not None and plan.upstream_conversation_id is not None
        items = input_items(outcome.appended_input) + [
            item for item in outcome.result.get("output") or [] if isinstance(item, dict)]
        items = [{key: value for key, value in item.items() if value is not None} for item in items]
        for start in range(0, len(items), _ITEMS_PER_CALL):
            await plan.backend.append_items(plan.upstream_conversation_id, items[start:start + _ITEMS_PER_CALL])

    def pending(self, key: str) -> bool:
        """Whether a turn of this conversation or response is being recorded here."""
        return key in self._pending

    async def wait_pending(self, key: str | None) -> None:
        """Wait until the turn of this conversation or response being recorded here (if
        any) is recorded."""
        task = self._pending.get(key) if key else None
        if task is not None and not task.done():
            # Shielded: a request that is cancelled while it waits must not cancel the
            # recording it waits for. Its failure is logged where it is recorded.
            try:
                await asyncio.shield(task)
            except Exception:
                pass



def _discarded(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:   # no longer pending: never listed, only kept
        log.error("removing the items an upstream's conversation took failed: %s", task.exception())


def _logged(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:   # the database: they stay taken (still listed)
        log.error("giving back the items of a failed turn failed: %s", task.exception())
