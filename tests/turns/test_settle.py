"""A turn that is not recorded gives back the items it took (issue 23), once, and a
recorded one keeps them taken: `Settler.give_back`, called when the runner settles a
turn and when it finishes one."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from gateway.turns.settle import Settler


class Items:
    def __init__(self):
        self.restored = []

    def restore_soon(self, conversation_id, item_ids):
        self.restored.append((conversation_id, item_ids))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def turn(status, items=("m1",), conversation_id="c"):
    return SimpleNamespace(added_items=items, conversation_id=conversation_id,
                           result={"status": status} if status else None)


async def test_turns_not_recorded_give_their_items_back_once():
    items = Items()
    settler = Settler(None, None, None, items)  # type: ignore[arg-type]
    failed = turn("failed")
    settler.give_back(failed)   # settled
    settler.give_back(failed)   # finished
    settler.give_back(turn(None, ("m2",)))   # ended before a result (cancelled, refused)
    for kept in (turn("completed"), turn("incomplete"), turn("requires_action"), turn("failed", ()),
                 turn("failed", ("m3",), conversation_id=None)):
        settler.give_back(kept)
    assert items.restored == [("c", ("m1",)), ("c", ("m2",))]


async def test_a_settler_without_items_gives_nothing_back():
    Settler(None, None, None).give_back(turn("failed"))  # type: ignore[arg-type]
