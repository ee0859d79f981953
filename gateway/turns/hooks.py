"""Named moments of a turn's life that observers hang on (metrics, traces, audit),
instead of being called from the business code: `refused` (prepare() refused the
request: nothing was created), `prepared` (the turn is valid and its backend chosen),
`first_event` (the backend's first read, or its JSON answer), `settled` (charged and
recorded: `turn.outcome.result` holds the usage and status), `streamed` (a stream's end, with
how many events its client was sent: counted once per stream, never per event),
`finished` (after the response, with the exception that ended it, if any).

Hooks are synchronous and cheap; one that raises is logged and never fails a request.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from gateway.schema.errors import ApiError
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.turns")

_MOMENTS = ("refused", "prepared", "first_event", "settled", "streamed", "finished")
_TWO_ARGUMENTS = ("streamed", "finished")


class TurnHooks:
    """An observer of turns: override the moments it cares about."""

    # True: its methods catch and log their own exceptions (they never raise), so when
    # it is the only observer the runner calls it directly, a Python call less per moment.
    shielded = False

    def refused(self, error: ApiError) -> None:
        """prepare() refused the request (4xx, or 503 when a store is unreachable)."""

    def prepared(self, turn: Turn) -> None:
        """The turn is valid, its backend chosen and what it needs created."""

    def first_event(self, turn: Turn) -> None:
        """The backend answered: its stream's first read, or its JSON response."""

    def settled(self, turn: Turn) -> None:
        """Charged and recorded, before the client is told (`turn.outcome`: its result, quotas)."""

    def streamed(self, turn: Turn, events: int) -> None:
        """A streamed turn ended (whichever way): `events` frames went to its sink (also
        `turn.events`, for an observer that records the stream at `finished`)."""

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        """After the response (`turn.outcome.abandoned`: its client left)."""


class Hooks(TurnHooks):
    """Every registered observer, each shielded from the others and from the turn.

    Each moment is bound, whenever an observer is added, to the cheapest call that
    reaches the observers overriding it: nothing at all for a moment none of them
    takes, the observer's own method when one shielded observer takes it, and a loop
    otherwise (with a `try` per observer unless every one is shielded). The runner
    calls a moment on every turn, so a moment nobody watches must cost one no-op call."""

    def __init__(self, observers: Sequence[TurnHooks] = ()):
        self._observers: tuple[TurnHooks, ...] = ()
        for observer in observers:
            self.add(observer)
        if not self._observers:
            self._bind()

    def add(self, observer: TurnHooks) -> None:
        self._observers = (*self._observers, observer)
        self._bind()

    def _bind(self) -> None:
        for moment in _MOMENTS:
            takers = tuple(observer for observer in self._observers if _takes(observer, moment))
            setattr(self, moment, _dispatch(moment, takers))


def _takes(observer: TurnHooks, moment: str) -> bool:
    """Whether the observer overrides the moment (in its class or on itself)."""
    return getattr(type(observer), moment, None) is not getattr(TurnHooks, moment) \
        or moment in getattr(observer, "__dict__", ())


def _nothing(*args: object) -> None:
    """A moment no observer takes."""


# speed: each moment bound to the cheapest call that reaches its observers (none, the one
# shielded observer's own method, an unrolled pair): with the usual two shielded
# observers ~1.2k instructions fewer a moment, five moments a turn (bench/README.md "The
# hot path's tricks"). Plain version: `shielding` below for every moment.
def _dispatch(moment: str, takers: tuple[TurnHooks, ...]) -> Callable[..., None]:
    if not takers:
        return _nothing
    calls: tuple[Callable[..., None], ...] = tuple(getattr(observer, moment) for observer in takers)
    if all(observer.shielded for observer in takers):
        if len(calls) == 1:
            return calls[0]   # no dispatch between the runner and it
        if len(calls) == 2:   # the usual pair (the metrics and one more): no loop, no argument tuple
            first, second = calls
            if moment in _TWO_ARGUMENTS:
                def both2(a: object, b: object) -> None:
                    first(a, b)
                    second(a, b)
                return both2

            def both(a: object) -> None:
                first(a)
                second(a)
            return both

        def each(*args: object) -> None:
            for call in calls:
                call(*args)
        return each
    named = tuple((type(observer).__name__, call) for observer, call in zip(takers, calls))

    def shielding(*args: object) -> None:
        for name, call in named:
            try:
                call(*args)
            except Exception:
                log.exception("turn hook %s.%s failed", name, moment)
    return shielding
