"""The engine's observer moments: the base observes nothing, and an observer that fails
is logged, never raised into the loop."""

from __future__ import annotations

import logging

from gateway.engine.hooks import EngineHooks, shielded


class Recording(EngineHooks):
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def tool(self, tool_type: str, ok: bool, seconds: float) -> None:
        self.seen.append((tool_type, ok, seconds))

    def round(self, ok: bool) -> None:
        raise RuntimeError("metrics backend gone")


def test_a_moment_reaches_its_observer():
    hooks = Recording()
    shielded(hooks, "tool", "mcp", True, 0.5)
    assert hooks.seen == [("mcp", True, 0.5)]
    for moment, args in (("round_started", ()), ("round", (True,)), ("tool_started", ("mcp",)),
                         ("tool", ("mcp", False, 1.0))):
        assert getattr(EngineHooks(), moment)(*args) is None   # the base: every moment, nothing done


def test_a_failing_observer_is_logged_not_raised(caplog):
    with caplog.at_level(logging.ERROR, logger="gateway.engine"):
        shielded(Recording(), "round", False)
    [record] = caplog.records
    assert record.getMessage() == "engine hook Recording.round failed" and record.exc_info is not None
