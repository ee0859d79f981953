"""Named moments of a turn's life that observers hang on (metrics, traces, audit),
instead of being called from the business code: `refused` (prepare() refused the
request: nothing was created), `prepared` (the turn is valid and its backend chosen),
`first_event` (the backend's first read, or its JSON answer), `settled` (charged and
recorded: `turn.result` holds the usage and status), `streamed` (a stream's end, with
how many events its client was sent: counted once per stream, never per event),
`finished` (after the response, with the exception that ended it, if any).

Hooks are synchronous and cheap; one that raises is logged and never fails a request.
"""

from __future__ import annotations

import logging
from typing import Sequence

from gateway.schema.errors import ApiError
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.turns")

_MOMENTS = ("refused", "prepared", "first_event", "settled", "streamed", "finished")


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
        """Charged and recorded, before the client is told (`turn.result`, `turn.quotas`)."""

    def streamed(self, turn: Turn, events: int) -> None:
        """A streamed turn ended (whichever way): `events` frames went to its sink."""

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        """After the response (`turn.abandoned`: its client left)."""


class Hooks(TurnHooks):
    """Every registered observer, each shielded from the others and from the turn."""

    def __init__(self, observers: Sequence[TurnHooks] = ()):
        self._observers: tuple[TurnHooks, ...] = ()
        for observer in observers:
            self.add(observer)

    def add(self, observer: TurnHooks) -> None:
        self._observers = (*self._observers, observer)
        only = self._observers[0] if len(self._observers) == 1 and self._observers[0].shielded else None
        for moment in _MOMENTS:
            if only is not None:
                setattr(self, moment, getattr(only, moment))   # shadows the loop below
            else:
                self.__dict__.pop(moment, None)

    def refused(self, error: ApiError) -> None:
        for observer in self._observers:
            try:
                observer.refused(error)
            except Exception:
                log.exception("turn hook %s.refused failed", type(observer).__name__)

    def prepared(self, turn: Turn) -> None:
        for observer in self._observers:
            try:
                observer.prepared(turn)
            except Exception:
                log.exception("turn hook %s.prepared failed", type(observer).__name__)

    def first_event(self, turn: Turn) -> None:
        for observer in self._observers:
            try:
                observer.first_event(turn)
            except Exception:
                log.exception("turn hook %s.first_event failed", type(observer).__name__)

    def settled(self, turn: Turn) -> None:
        for observer in self._observers:
            try:
                observer.settled(turn)
            except Exception:
                log.exception("turn hook %s.settled failed", type(observer).__name__)

    def streamed(self, turn: Turn, events: int) -> None:
        for observer in self._observers:
            try:
                observer.streamed(turn, events)
            except Exception:
                log.exception("turn hook %s.streamed failed", type(observer).__name__)

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        for observer in self._observers:
            try:
                observer.finished(turn, error)
            except Exception:
                log.exception("turn hook %s.finished failed", type(observer).__name__)
