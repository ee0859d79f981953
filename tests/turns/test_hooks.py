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
    assert hooks.prepared != shielded.prepared
    hooks.prepared(object())                  # type: ignore[arg-type]: never raises
    assert shielded.seen == plain.seen == ["prepared"]
    assert "turn hook _Plain.prepared failed" in caplog.text
    lone_plain = Hooks([_Plain()])
    assert lone_plain.prepared != lone_plain._observers[0].prepared
    lone_plain.prepared(object())             # type: ignore[arg-type]


class _Finishing(TurnHooks):
    shielded = True

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def finished(self, turn, error) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(f"finished {error}")


def test_a_moment_reaches_only_the_observers_that_take_it():
    seen: list[str] = []
    shielded, first, second = _Shielded(), _Finishing(seen), _Finishing(seen)
    hooks = Hooks([shielded, first])
    assert hooks.prepared == shielded.prepared   # `first` does not take `prepared`
    assert hooks.finished == first.finished       # nor `shielded` `finished`
    hooks.add(second)
    hooks.finished(object(), None)                # type: ignore[arg-type]: both, in order, no shielding loop
    assert seen == ["finished None", "finished None"]
    hooks.add(_Finishing(seen))
    hooks.finished(object(), "error")            # type: ignore[arg-type]: three
    assert seen[2:] == ["finished error"] * 3
    nobody = Hooks()
    assert nobody.settled(object()) is None       # type: ignore[arg-type]: a moment nobody takes
    assert hooks.streamed == nobody.streamed
