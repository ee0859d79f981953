"""The runner's hook dispatch: observers shielded from each other and from the turn."""

from __future__ import annotations

import logging

from gateway.turns.hooks import Hooks, TurnHooks


class _Shielded(TurnHooks):
    shielded = True

    def __init__(self) -> None:
        self.seen: list[str] = []

    def prepared(self, turn) -> None:  # type: ignore[no-untyped-def]
        try:
            self.seen.append("prepared")
            raise RuntimeError("metric broke")
        except Exception:
            logging.getLogger("test").exception("shielded")


class _Plain(TurnHooks):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def prepared(self, turn) -> None:  # type: ignore[no-untyped-def]
        self.seen.append("prepared")
        raise RuntimeError("observer broke")


def test_a_lone_shielded_observer_is_called_directly():
    only = _Shielded()
    hooks = Hooks([only])
    assert hooks.prepared == only.prepared   # no dispatch loop between the runner and it
    hooks.prepared(object())                  # type: ignore[arg-type]
    assert only.seen == ["prepared"]


def test_a_second_observer_or_an_unshielded_one_goes_through_the_shielding_loop(caplog):
    shielded, plain = _Shielded(), _Plain()
    hooks = Hooks([shielded])
    hooks.add(plain)
    assert "prepared" not in vars(hooks)
    hooks.prepared(object())                  # type: ignore[arg-type]: never raises
    assert shielded.seen == plain.seen == ["prepared"]
    assert "turn hook _Plain.prepared failed" in caplog.text
    lone_plain = Hooks([_Plain()])
    assert "prepared" not in vars(lone_plain)
    lone_plain.prepared(object())             # type: ignore[arg-type]
