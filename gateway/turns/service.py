"""`TurnService`: what the endpoint adapters call, put together once by the wiring."""

from __future__ import annotations

from typing import Any, Coroutine, Mapping

from gateway.identity import Identity
from gateway.schema.errors import ApiError
from gateway.schema.json_types import JsonObject
from gateway.schema.limits import RequestLimits, check_counts
from gateway.turns.owned import OwnedTurns
from gateway.turns.backend_choice import BackendSelector
from gateway.turns.prepare import CALLER, Checked, Preparer, Recorded
from gateway.turns.run import BodySink, FrameSink, Runner
from gateway.turns.settle import Settler
from gateway.turns.turn import Backend, Turn


class TurnService:
    def __init__(self, preparer: Preparer, runner: Runner, settler: Settler, owned: OwnedTurns,
                 backend: BackendSelector, limits: RequestLimits = RequestLimits()):
        self._preparer = preparer
        # The operator's caps on a request's lists, checked before anything reads them
        # (`parse_responses_request(raw, ..., limits=turns.limits)` checks them too).
        self.limits = limits
        self.runner = runner
        self._settler = settler   # how turns end
        self._owned = owned       # what they recorded
        self._backend = backend

    async def prepare(self, identity: Identity, raw: Any, headers: Mapping[str, str],
                      prompt_field: str = "instructions", *, quota_subject: Any = CALLER,
                      server_prompt: str | None = None, shown_previous: str | None = None,
                      recorded: Recorded | None = None, checked: Checked | None = None) -> Turn:
        """A turn ready to run, or the 4xx that refuses it with nothing created
        (`prompt_field`, `quota_subject`, `server_prompt`, `shown_previous`, `recorded`,
        `checked`: see `Preparer.prepare`)."""
        try:
            check_counts(raw, self.limits.responses())
            turn = await self._preparer.prepare(identity, raw, headers, prompt_field, quota_subject=quota_subject,
                                                server_prompt=server_prompt, shown_previous=shown_previous,
                                                recorded=recorded, checked=checked)
        except ApiError as exc:
            self.runner.hooks.refused(exc)
            raise
        self.runner.hooks.prepared(turn)
        return turn

    def redacted(self, items: list[JsonObject]) -> list[JsonObject]:
        """Items a client adds to a conversation, as the redaction shields rewrite them."""
        return self._preparer.redacted(items)

    async def check(self, identity: Identity, raw: Any) -> Checked:
        """The refusals a request gets from itself alone (`Preparer.check`), counted as
        `prepare()`'s are; nothing is admitted or created. What it found can be handed
        to `prepare()` of the same body."""
        try:
            check_counts(raw, self.limits.responses())
            return await self._preparer.check(identity, raw)
        except ApiError as exc:
            self.runner.hooks.refused(exc)
            raise

    def stopping(self, turn: Turn, reason: str | None) -> None:
        """Before a stream is cancelled: its client stops it and keeps what it got
        (`Settler.stopping`)."""
        self._settler.stopping(turn, reason)

    def interrupted(self, turn: Turn, partial: JsonObject | None, appended_input: Any) -> None:
        """A stream its user interrupted: recorded with its partial answer and charged as
        abandoned (`Settler.interrupted`)."""
        self._settler.interrupted(turn, partial, appended_input)

    def run(self, turn: Turn, sink: BodySink | FrameSink) -> Coroutine[Any, Any, None]:
        # speed: the runner's coroutine itself, not one awaiting it: a held stream keeps one
        # frame fewer (~0.5 KiB) and each read resumes one fewer (~250 instructions a read;
        # bench/README.md "The hot path's tricks"). Plain version:
        # `async def run(...) -> None: await self.runner.run(turn, sink)`.
        return self.runner.run(turn, sink)

    async def backend(self) -> Backend:
        """The backend turns run on (stored-response reads go to it too)."""
        return await self._backend()

    async def wait_recorded(self, key: str) -> None:
        """Wait until a turn of this conversation (or response) being recorded in this
        process is recorded (another replica's are committed before their client hears)."""
        await self._owned.wait(key)

    async def drain(self) -> None:
        """Wait until every finished turn is recorded (at shutdown)."""
        await self._settler.drain()

    async def close(self) -> None:
        """After `drain()`: the backends' own connections, the places of running turns
        this process held (processes sharing a database)."""
        await self._backend.close()
        await self._preparer.in_progress.close()
