"""Named moments of the local engine's loop that observers (metrics) hang on, instead
of being called from the loop: a model round's end, a server-side tool call's end.
Synchronous and cheap; one that raises is logged and never fails the turn."""

from __future__ import annotations

import logging

log = logging.getLogger("gateway.engine")


class EngineHooks:
    """An observer of the loop; this base observes nothing."""

    def round_started(self) -> None:
        """A model round is about to call the upstream (traces open its span here)."""

    def round(self, ok: bool) -> None:
        """A model round (one Chat Completions call) ended: answered, or failed."""

    def tool_started(self, tool_type: str) -> None:
        """A server-side tool call starts, in the task that runs it."""

    def tool(self, tool_type: str, ok: bool, seconds: float) -> None:
        """A server-side tool call ended (`tool_type`: the request tool's `type`)."""


def shielded(hooks: EngineHooks, moment: str, *args: object) -> None:
    """Call one moment of an observer; its failure is logged, never raised."""
    try:
        getattr(hooks, moment)(*args)
    except Exception:
        log.exception("engine hook %s.%s failed", type(hooks).__name__, moment)
