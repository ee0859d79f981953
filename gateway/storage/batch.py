"""What takes part in a turn writer's batch besides the turns' records (the quota
charges), as the writer sees it: `BatchParticipant`.

A turn may hand the writer one *charge* with its record (an object the participant
defines; the writer only carries it). For a batch, the participant makes the statements
of all its charges at once (so it can merge those on one row: on PostgreSQL one
statement for every balance a batch charges), which commit in the records'
transaction; once that committed, it is told which charges did, with the rows their
statements returned, before the batch's clients are told.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence, TypeVar

from gateway.storage.database import Params, Row

# A statement with its place in the lock order: (lock key, sql, params). A batch runs
# them sorted by the key, a total order on the rows they lock (e.g. "balance\0
# <limiter>\0<subject>"), so two concurrent transactions that follow it cannot deadlock.
Keyed = tuple[str, str, Params]

Charge = TypeVar("Charge", contravariant=True)


class BatchParticipant(Protocol[Charge]):
    def statements(self, charges: Sequence[Charge]) -> list[Keyed]:
        """The statements that apply these charges (the charges of a batch, or of one
        turn when a batch is retried turn by turn)."""
        ...

    async def committed(self, charges: Sequence[Charge], rows: Sequence[Row]) -> None:
        """These charges are committed; `rows`: what their statements returned (none
        when the batch was retried turn by turn)."""
        ...


def in_lock_order(statements: Iterable[Keyed]) -> list[tuple[str, Params]]:
    """Keyed statements as the database API takes them, sorted by their lock order."""
    return [(sql, params) for _, sql, params in sorted(statements, key=lambda statement: statement[0])]
