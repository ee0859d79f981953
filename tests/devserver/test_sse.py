"""The stand-in's SSE writing: a burst in one write without a delay, paced frames with
one, and a client that went away ending the stream quietly."""

from __future__ import annotations

import pytest

from gateway.devserver import sse
from gateway.devserver.sse import finish, write_frames


class Response:
    def __init__(self, fail_after: int | None = None):
        self.writes: list[bytes] = []
        self.fail_after = fail_after

    async def write(self, data: bytes) -> None:
        if self.fail_after is not None and len(self.writes) >= self.fail_after:
            raise ConnectionResetError("client gone")
        self.writes.append(data)

    async def write_eof(self) -> None:
        raise RuntimeError("transport closed")


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(sse.asyncio, "sleep", sleep)
    return slept


async def test_a_burst_is_one_write(sleeps):
    response = Response()
    assert await write_frames(response, [b"a", b"b", b"c"], 0)   # type: ignore[arg-type]
    assert response.writes == [b"abc"] and sleeps == []
    assert await write_frames(response, [], 0)   # type: ignore[arg-type]
    assert response.writes == [b"abc"]


async def test_paced_frames_wait_between_them(sleeps):
    response = Response()
    assert await write_frames(response, [b"a", b"b", b"c"], 0.2)   # type: ignore[arg-type]
    assert response.writes == [b"a", b"b", b"c"] and sleeps == [0.2, 0.2]
    assert await write_frames(response, [b"d"], 0.2, pause_first=True)   # type: ignore[arg-type]
    assert sleeps == [0.2, 0.2, 0.2]


async def test_a_client_that_went_away_ends_the_stream_quietly(sleeps):
    response = Response(fail_after=1)
    assert await write_frames(response, [b"a", b"b"], 0.1) is False   # type: ignore[arg-type]
    assert response.writes == [b"a"]
    await finish(response)   # type: ignore[arg-type]  (its write_eof fails: nothing raised)
