"""The end of a turn's life: `settle()` before the terminal event or JSON body,
`finish()` after the response, and the registry of turns still being recorded.

`settle()` charges the turn's tokens and commits its record (group-committed with
concurrent turns by `TurnWriter`), so whatever replica the client continues on finds
it (docs/architecture.md, "A turn's life": `Settler.settle`); it still completes
when the client has gone away, and a
request in this process about the same conversation or response that arrives
meanwhile waits for it (`wait_pending()`). `finish()` settles a turn its caller did
not (it ended without a terminal event, or the client left), charging an abandoned
turn what it used (`Turn.stopped_charge`): aborting is no way around a quota.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from datetime import datetime, timezone
from typing import Any

from gateway.identity import Identity
from gateway.quota.reservation import Charge, Reservation
from gateway.quota.service import QuotaService
from gateway.schema.errors import ApiError, database_error
from gateway.storage.conversation_items import ConversationItems
from gateway.storage.conversations import ConversationRecord, ConversationRepository, TurnRecord
from gateway.storage.writer import TurnWriter
from gateway.turns.body import input_items
from gateway.turns.content import turn_content
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


# The last whole second `_iso` formatted, and its text.
_second: tuple[float, str] = (-1.0, "")


def _iso(seconds: float) -> str:
    """ISO-8601 UTC with microseconds, exactly as `datetime.fromtimestamp(seconds,
    timezone.utc).isoformat()` writes it (no fraction when it is zero). The date and time
    are formatted once a second: `isoformat()` costs ~7k instructions a call, and a turn
    makes two (callgrind). The microseconds are rounded as datetime rounds them (half to
    even, carried into the second)."""
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
    def __init__(self, conversations: ConversationRepository, writer: TurnWriter, quota: QuotaService,
                 items: ConversationItems | None = None):
        self._conversations = conversations
        self._writer = writer
        self._quota = quota
        self._items = items   # where a turn that is not recorded gives back the items it took
        self._pending: dict[str, asyncio.Future[Any]] = {}   # conversation / response id -> its recording
        self._background: set[asyncio.Future[Any]] = set()

    async def settle(self, turn: Turn) -> dict[str, int]:
        """Before the terminal event or body: charge the turn's tokens and commit its
        record (group-committed with concurrent turns; after appending it to the upstream
        conversation when it was chained), once. Returns the balance after it
        (`available_quotas`). A client that is then told the turn is done can continue it
        at once on any replica. Raises `database_error()` when the record cannot be
        committed: the client is not told the turn is done."""
        if turn.quotas is not None:
            return turn.quotas
        if not turn.store and turn.reservation is None:
            # Nothing to record, nothing to charge (no quotas, or an adapter that checks
            # none: `/v1/infer` without `rlsapi_v1.quota_subject`).
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

    def _submitted(self, turn: Turn) -> asyncio.Future[Any] | None:
        """The common turn's settling without a task of its own (a few µs a turn): its
        record, with its charge when the quota storage is the turn database, handed to
        the writer at once; the writer's future. None: `_settle()` it is."""
        if turn.append_to_upstream or turn.result is None or (turn.summary is not None and not turn.summary.done()):
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
        # The reservation's subject: the caller, or whom the adapter charges (`/v1/infer`).
        return quotas if quotas is not None else await self._quota.available(turn.reservation.user_id)

    def _charge(self, turn: Turn) -> Charge:
        """The charge of a turn with a result: the upstream's input + output tokens; a
        turn its client stopped (a cancelled background one) as an abandoned one is
        (`Turn.stopped_charge`), whatever usage its result shows so far, and so is one
        whose stream broke before the upstream reported usage (it received the turn)."""
        assert turn.reservation is not None and turn.result is not None
        if turn.abandoned or (turn.unreported and not turn.result.get("usage")):
            usage = turn.usage or {}
            output = int(usage.get("output_tokens") or 0)
            spent = (turn.stopped_charge() - output, output)
        else:
            usage = turn.result.get("usage") or {}
            spent = (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0))
        return self._quota.charge(turn.reservation, *spent, turn.model.id, turn.model.provider_id)

    async def _settle(self, turn: Turn) -> dict[str, int]:
        """The charge (the upstream's input + output tokens to every limiter, releasing
        the reservation) and the record: one transaction when the quota storage is the
        turn database, else the charge first, then the record."""
        charge = self._charge(turn) if turn.reservation is not None and turn.result is not None else None
        try:
            if turn.store and turn.result is not None:
                await summary_of(turn)   # committed with the record (started with the turn, so rarely awaited)
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
        return await self._quota.available(turn.reservation.user_id) if turn.reservation is not None else {}

    def finish(self, turn: Turn) -> None:
        """After the response: a turn that reached its terminal event is settled even if
        the handler never got to it (background; `drain()` waits for it). A turn that
        never got a terminal response ends its reservation: charged as a stopped turn
        when the client abandoned it (aborting is no way around a quota: the rounds it
        used, the one in flight, at least its reservation), else what the engine's
        finished rounds reported."""
        if turn.added_items:
            self.give_back(turn)   # it ended without settling (refused by the backend, cancelled)
        if turn._settling is not None:
            return
        if turn.result is None:
            if turn.summary is not None:
                turn.summary.cancel()   # no record to put it in
            if turn.reservation is not None:
                done = asyncio.ensure_future(self._quota.release(
                    turn.reservation, turn.stopped_charge() if turn.abandoned or turn.unreported else turn.used))
                turn._settling = done
                self._background.add(done)
                done.add_done_callback(lambda future: self._finished(future, (None, "")))
            return
        if not turn.store and turn.reservation is None:
            return
        turn._settling = asyncio.ensure_future(self._settle(turn))
        self._track(turn, turn._settling)

    def interrupted(self, turn: Turn, partial: dict[str, Any] | None, appended_input: Any) -> None:
        """A stream its user interrupted (LCORE's `/v1/streaming_query/interrupt`), before
        `finish()`: recorded with its partial answer (`partial`, the response object so
        far, under its id; None: there is none, it ends as any abandoned turn without a
        result) and charged as an abandoned turn (`Turn.stopped_charge`). Where the
        upstream keeps the conversation, `appended_input` and the partial answer are
        added to it (as a chained turn's are, `_append_turn`); the local engine saved
        the partial response itself (`turn.stopped_reason`), so the next turn's
        `previous_response_id` continues from it. A turn that already has its result
        ended otherwise and is left as it is."""
        if turn.result is not None or partial is None:
            return
        turn.result = partial
        turn.abandoned = True
        if turn.upstream_conversation_id is not None:
            turn.append_to_upstream = True
            # The items it took from the conversation go with it (`give_back` discards them).
            turn.appended_input = [*turn.added_input, *input_items(appended_input)] if turn.added_input \
                else appended_input

    def give_back(self, turn: Turn) -> None:
        """Items clients added to a conversation go with its next turn (`Preparer` takes
        them); a turn that ends without being recorded (failed, cancelled, abandoned
        before its end) gives them back, once, so the turn after it sends them, as
        OpenAI's conversation still holds them (issue 23). A recorded turn of an
        upstream's conversation left them there: the gateway's copies go (issue 41).
        Called when the turn is settled (before its client is told it failed) and when it
        finishes; the usual turn took none and never gets here."""
        if not turn.added_items or turn.conversation_id is None or self._items is None:
            return
        try:
            result = turn.result
            if result is not None and result.get("status") in _RECORDED_STATUSES:
                if turn.upstream_conversation_id is not None:
                    item_ids, turn.added_items = turn.added_items, ()   # once
                    done = asyncio.ensure_future(self._items.discard(turn.conversation_id, item_ids))
                    self._background.add(done)   # `drain()` waits for it
                    done.add_done_callback(self._background.discard)
                    done.add_done_callback(_discarded)
                return
            item_ids, turn.added_items = turn.added_items, ()   # once
            self._items.restore_soon(turn.conversation_id, item_ids).add_done_callback(_logged)
        except Exception:   # never fails the turn: they stay taken (still listed)
            log.exception("giving back the items of a failed turn failed")

    def _track(self, turn: Turn, done: asyncio.Future[Any]) -> None:
        """Requests about this conversation or response wait for its record (in-process:
        another replica only sees it committed, which happens before the client is told)."""
        keys = (turn.conversation_id, str((turn.result or {}).get("id")))
        for key in keys:
            if key:
                self._pending[key] = done
        self._background.add(done)
        done.add_done_callback(lambda future: self._finished(future, keys, turn.reservation))

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
        response = turn.result
        assert response is not None and turn.conversation_id is not None
        completed_at = _now()
        started_at = _iso(turn.started)
        conversation = ConversationRecord(
            id=turn.conversation_id, user_id=turn.identity.user_id, upstream_id=turn.upstream_conversation_id,
            created_at=started_at, last_message_at=completed_at, last_used_model=turn.model.id,
            last_used_provider=turn.model.provider_id, last_response_id=None, message_count=0,
            topic_summary=_made_summary(turn),
            generate_topic_summary=turn.generate_topic_summary is not False and turn.existing is None)
        if response.get("status") not in _RECORDED_STATUSES or not isinstance(response.get("id"), str):
            return conversation, None  # a failed turn: the conversation exists, the turn does not count
        return conversation, TurnRecord(
            conversation_id=turn.conversation_id, response_id=response["id"],
            previous_response_id=turn.previous_response_id, model=turn.model.id,
            provider=turn.model.provider_id, status=response["status"], started_at=started_at,
            completed_at=completed_at, tokens=_reported(response),
            content=turn_content(turn.question, response, turn.conversation_form))

    async def _append_turn(self, turn: Turn) -> None:
        """A turn sent with previous_response_id in a conversation the upstream keeps:
        add its input and output to that conversation, as `conversation` would have."""
        assert turn.result is not None and turn.upstream_conversation_id is not None
        items = input_items(turn.appended_input) + [
            item for item in turn.result.get("output") or [] if isinstance(item, dict)]
        items = [{key: value for key, value in item.items() if value is not None} for item in items]
        for start in range(0, len(items), _ITEMS_PER_CALL):
            await turn.backend.append_items(turn.upstream_conversation_id, items[start:start + _ITEMS_PER_CALL])

    async def owned_turn(self, identity: Identity, response_id: str) -> TurnRecord | None:
        """The recorded turn behind a response id, if it belongs to the caller."""
        await self.wait_pending(response_id)
        found = await self._conversations.find_turn(response_id)
        if found is None or found[1].user_id != identity.user_id:
            return None
        return found[0]

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
