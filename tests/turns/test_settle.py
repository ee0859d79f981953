"""A turn that is not recorded gives back the items it took (issue 23), once, and a
recorded one keeps them taken: `Settler.give_back`, called when the runner settles a
turn and when it finishes one. And the records' timestamps: `_iso` writes what
`datetime.isoformat()` would."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from types import SimpleNamespace

from hypothesis import given, strategies as st

from gateway.turns.settle import Settler, _iso


class Items:
    def __init__(self):
        self.restored = []

    def restore_soon(self, conversation_id, item_ids):
        self.restored.append((conversation_id, item_ids))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def turn(status, items=("m1",), conversation_id="c"):
    return SimpleNamespace(plan=SimpleNamespace(added_items=items, conversation_id=conversation_id),
                           outcome=SimpleNamespace(result={"status": status} if status else None, gave_back=False))


async def test_turns_not_recorded_give_their_items_back_once():
    items = Items()
    settler = Settler(None, None, items)  # type: ignore[arg-type]
    failed = turn("failed")
    settler.give_back(failed)   # settled
    settler.give_back(failed)   # finished
    settler.give_back(turn(None, ("m2",)))   # ended before a result (cancelled, refused)
    for kept in (turn("completed"), turn("incomplete"), turn("requires_action"), turn("failed", ()),
                 turn("failed", ("m3",), conversation_id=None)):
        settler.give_back(kept)
    assert items.restored == [("c", ("m1",)), ("c", ("m2",))]


async def test_a_settler_without_items_gives_nothing_back():
    Settler(None, None).give_back(turn("failed"))  # type: ignore[arg-type]


# -- the records' timestamps ---------------------------------------------------------------

def _datetime_iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


@given(st.one_of(
    st.floats(min_value=-62_135_596_800.0 + 86_400, max_value=253_402_300_799.0, allow_nan=False),
    # Around now, at the microsecond and on its half (datetime rounds half to even).
    st.integers(0, 4 * 10**6).map(lambda half_micros: 1_764_216_000 + half_micros / 2e6),
    st.integers(0, 10**9).map(float)))
def test_iso_is_datetimes_isoformat(seconds: float) -> None:
    assert _iso(seconds) == _datetime_iso(seconds)


def test_iso_edges() -> None:
    # No fraction on a whole second; a fraction that rounds up carries into the second.
    for seconds in (0.0, 1_764_216_000.0, 1_764_216_000.0000005, 1_764_216_000.0000015, 1_764_216_000.9999996,
                    1_764_216_000.9999994, -0.5, -1.0000004):
        assert _iso(seconds) == _datetime_iso(seconds)
    assert _iso(1_764_216_000.0) == "2025-11-27T04:00:00+00:00"
    assert _iso(1_764_216_000.25) == "2025-11-27T04:00:00.250000+00:00"
