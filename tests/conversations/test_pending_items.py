"""A turn that is not recorded gives back the items it took (issue 23), once, and a
recorded one keeps them taken."""

from __future__ import annotations

from types import SimpleNamespace

from gateway.conversations.pending_items import PendingItems


class Items:
    def __init__(self):
        self.restored = []

    def restore_soon(self, conversation_id, item_ids):
        import asyncio
        self.restored.append((conversation_id, item_ids))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def turn(status, items=("m1",)):
    return SimpleNamespace(added_items=items, conversation_id="c", result={"status": status} if status else None)


async def test_failed_turns_give_their_items_back_once():
    items = Items()
    hook = PendingItems(items)
    failed = turn("failed")
    hook.settled(failed)
    hook.finished(failed, None)
    cancelled = turn(None, ("m2",))
    hook.finished(cancelled, RuntimeError())
    for kept in (turn("completed"), turn("incomplete"), turn("failed", ())):
        hook.settled(kept)
        hook.finished(kept, None)
    assert items.restored == [("c", ("m1",)), ("c", ("m2",))]
