"""What the local engine reads of a prepared turn: the turn hands it what it needs, and
the engine knows nothing of where turns are prepared (`gateway/turns/` satisfies this
protocol structurally)."""

from __future__ import annotations

from typing import Any, Protocol

from gateway.schema.json_types import ResponseUsage


class EngineModel(Protocol):
    @property
    def id(self) -> str: ...


class EngineIdentity(Protocol):
    @property
    def user_id(self) -> str: ...


class EnginePlan(Protocol):
    """What the turn's plan says (`turns/turn.py` Plan)."""

    @property
    def model(self) -> EngineModel: ...

    @property
    def identity(self) -> EngineIdentity: ...

    @property
    def display_model(self) -> str: ...

    @property
    def previous_response_id(self) -> str | None: ...

    @property
    def shown_conversation(self) -> str | dict[str, str] | None: ...

    @property
    def store(self) -> bool: ...

    @property
    def background(self) -> bool: ...


class EngineOutcome(Protocol):
    @property
    def stopped_reason(self) -> str | None:
        """Set (before its stream is cancelled) when the client stops the turn and wants
        what was streamed so far kept: the engine saves the partial response as
        `incomplete` with this reason. None: a stopped stream is abandoned."""


class EngineTurn(Protocol):
    body: dict[str, Any]                 # the Responses body; the engine drops it once translated

    @property
    def plan(self) -> EnginePlan: ...

    @property
    def outcome(self) -> EngineOutcome: ...

    @property
    def usage(self) -> ResponseUsage | None: ...

    def round_ended(self, usage: ResponseUsage) -> None:
        """A round ended: the usage of every finished round so far (the turn is charged
        it, however it ends)."""

    def round_lost(self) -> None:
        """A round's stream was lost before the upstream reported its usage (broken, cut,
        malformed): the turn is charged as a stopped one (its reservation at least)."""

    async def admit_round(self, context_tokens: int) -> bool:
        """Before each round after the first, with what the round sends: may it run (the
        turn reserves it)? False: the response ends `incomplete` with what it has."""
        ...
