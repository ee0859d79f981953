"""Items clients added to a conversation the gateway keeps go with its next turn
(`turns/prepare.py` takes them); a turn that ends without being recorded (failed,
cancelled, abandoned before its end) gives them back, so the turn after it sends them,
as OpenAI's conversation still holds them (issue 23). A runner hook: the usual turn
took none and costs one attribute test."""

from __future__ import annotations

import asyncio
import logging

from gateway.storage.conversation_items import ConversationItems
from gateway.turns.hooks import TurnHooks
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.conversations")

_RECORDED = ("completed", "incomplete", "requires_action")   # the statuses a turn is recorded with


class PendingItems(TurnHooks):
    shielded = True   # _give_back catches and logs its own errors

    def __init__(self, items: ConversationItems):
        self._items = items

    def settled(self, turn: Turn) -> None:
        # Before the client is told the turn failed: its next request finds them back.
        self._give_back(turn)

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        self._give_back(turn)   # a turn that ended without settling (refused by the backend, cancelled)

    def _give_back(self, turn: Turn) -> None:
        if not turn.added_items or turn.conversation_id is None:
            return
        try:
            result = turn.result
            if result is not None and result.get("status") in _RECORDED:
                return
            item_ids, turn.added_items = turn.added_items, ()   # once
            self._items.restore_soon(turn.conversation_id, item_ids).add_done_callback(_logged)
        except Exception:   # shielded: a hook never fails a turn
            log.exception("giving back the items of a failed turn failed")


def _logged(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:   # the database: they stay taken (still listed)
        log.error("giving back the items of a failed turn failed: %s", task.exception())
