"""A replica's holds on PostgreSQL balances: admission without a round trip under load.

Admission must see every replica's reservations, so on PostgreSQL a turn that needs
tokens asks the database (`admission.py`, one statement for the turns that ask
together). What it reserves goes to the replica's *hold* on that balance: one
reservation row per replica and balance (`gateway_quota_reservations`, its id this
process's prefix and a count), not one per turn. A turn's charge takes its tokens off
the hold again, in the same transaction, so `reserved` on the balance row is always
what live turns hold plus the holds' spare.

The spare: when a balance has plenty of room (at least `ROOMY` times what is asked
beyond what the batch needs), the statement also reserves for this replica `SPARE`
times the batch's need or times what the hold has in use, the larger. Later turns are
admitted against the spare in memory, without awaiting anything, as long as it covers
them. A turn's committed charge takes its tokens off the hold (row and memory alike),
so the spare does not refill as turns end: tokens a charge spent are never admitted
again; the next statement brings a new spare. So under load most turns never wait for
the database, and none can overspend: every token a turn is admitted with is reserved
in the database first. A balance short of room gets no spare, and behaves as if each
turn reserved its own tokens.

Every scheduler period (`LimitedQuota._scheduler`) the spare is given back (`tick`),
holds with nothing in use are deleted and the rest have their expiry renewed. So an
idle replica holds nothing, and a balance lowered by the quota API or a top-up that
falls due is seen by every replica within one period. A replica that dies leaves its
rows to expire; the sweep of any other replica releases them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from gateway.quota.balances import Pair

SPARE = 4     # a spare of this many times the batch's need, or what the hold has in use ...
ROOMY = 8     # ... when the balance has this many spares of room beyond the batch


@dataclass(slots=True, eq=False)
class Hold:
    """This replica's hold on one balance: `held` tokens in its database row, `used` of
    them by turns in progress; the rest is spare."""

    id: str
    limiter: str
    subject: str
    held: int = 0
    used: int = 0
    until: float = 0.0               # the balance's next top-up (database clock, seconds): admits before it
    asking: int = 0                  # admission statements in flight for it
    active: bool = field(default=True)   # False once dropped by `tick` (its row deleted)


class Holds:
    def __init__(self, prefix: str):
        self._prefix = prefix
        self._count = 0
        self._by_key: dict[tuple[str, str], Hold] = {}   # (limiter name, subject)

    def __len__(self) -> int:
        return len(self._by_key)

    def for_pairs(self, pairs: Sequence[Pair]) -> tuple[Hold, ...]:
        """The holds on these balances, made when missing (in memory: a row is written
        by the first admission)."""
        found = []
        for limiter, subject in pairs:
            hold = self._by_key.get((limiter.name, subject))
            if hold is None:
                self._count += 1
                hold = self._by_key[(limiter.name, subject)] = Hold(f"{self._prefix}{self._count:x}", limiter.name,
                                                                    subject)
            found.append(hold)
        return tuple(found)

    def admit(self, pairs: Sequence[Pair], need: int, now: float) -> tuple[Hold, ...] | None:
        """The turn's holds, `need` taken from each one's spare, when every one covers
        it and no top-up is due (`now`: the database clock); else None (the database
        must be asked: it applies the top-up first)."""
        by_key = self._by_key
        holds = []
        for limiter, subject in pairs:
            hold = by_key.get((limiter.name, subject))
            if hold is None or hold.held - hold.used < need or now >= hold.until:
                return None
            holds.append(hold)
        for hold in holds:
            hold.used += need
        return tuple(holds)

    @staticmethod
    def ended(holds: Sequence[Hold], tokens: int, released: bool) -> None:
        """A turn holding `tokens` on each of `holds` ended. `released`: its charge,
        which takes them off the rows too, was committed; else they stay held, as spare
        for the next turns (`tick` gives that back)."""
        for hold in holds:
            hold.used -= tokens
            if released:
                hold.held -= tokens

    def tick(self) -> list[tuple[str, str, str, int, bool]]:
        """What the period's statement does to each row: (id, limiter, subject, tokens
        to give back, delete the row). Applied here at once, before the statement is
        sent: the spare given back is no longer admitted against, and a hold with
        nothing in use (and no admission asking for it) is forgotten."""
        changes = []
        for key, hold in list(self._by_key.items()):
            drop = hold.used == 0 and hold.asking == 0
            give_back = hold.held if drop else max(0, hold.held - hold.used)
            if drop:
                del self._by_key[key]
                hold.active = False
            hold.held -= give_back
            changes.append((hold.id, hold.limiter, hold.subject, give_back, drop))
        return changes

    def missing(self, kept: set[str], changes: Sequence[tuple[str, str, str, int, bool]]) -> list[Hold]:
        """The holds still kept whose row `tick`'s statement did not find."""
        lost = {hold_id for hold_id, _, _, _, gone in changes if not gone and hold_id not in kept}
        return [hold for hold in self._by_key.values() if hold.id in lost] if lost else []

    def forget_all(self) -> list[tuple[str, str, str, int, bool]]:
        """Every row to delete (at shutdown, once turns are drained)."""
        changes = [(hold.id, hold.limiter, hold.subject, hold.held, True) for hold in self._by_key.values()]
        self._by_key.clear()
        return changes
