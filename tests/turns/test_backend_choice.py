"""`BackendSelector`: the backend is chosen on first use and kept; a failed probe is
asked again on the next turn."""

from __future__ import annotations

import pytest

from gateway.turns.backend_choice import BackendSelector


class _Backend:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class _Capabilities:
    def __init__(self, *answers: bool | Exception) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def uses_engine(self) -> bool:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_the_choice_is_made_once_and_kept():
    forward, engine = _Backend("forward"), _Backend("engine")
    capabilities = _Capabilities(True, False)
    selector = BackendSelector(forward, engine, capabilities)   # type: ignore[arg-type]
    assert await selector() is engine and await selector() is engine
    assert capabilities.asked == 1


async def test_a_failed_probe_is_asked_again():
    forward, engine = _Backend("forward"), _Backend("engine")
    capabilities = _Capabilities(ConnectionError("upstream down"), False)
    selector = BackendSelector(forward, engine, capabilities)   # type: ignore[arg-type]
    with pytest.raises(ConnectionError):
        await selector()
    assert await selector() is forward and capabilities.asked == 2


async def test_closing_closes_both_backends():
    forward, engine = _Backend("forward"), _Backend("engine")
    await BackendSelector(forward, engine, _Capabilities()).close()   # type: ignore[arg-type]
    assert forward.closed and engine.closed
