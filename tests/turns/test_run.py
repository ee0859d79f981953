"""`client_left()`, the one definition of a turn's caller going away, and the runner's
use of it: a sink whose write fails however a closed connection makes it fail abandons
the turn, which is charged its reservation (docs/quotas.md), never nothing. And
`Preparer.check`, the refusals a request gets from itself alone (the WebSocket refuses
a message with it when it arrives): nothing is admitted, reserved or created."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import ClientConnectionResetError

from gateway.schema.errors import ApiError
from gateway.turns.run import client_left
from tests.turns.test_life import RESERVED, USER, Frames, life, store  # noqa: F401  (store: a fixture)


@pytest.mark.parametrize("exc", [
    asyncio.CancelledError(),
    ConnectionError("Connection lost"),            # aiohttp's drain() after the client closed
    ConnectionResetError("Connection lost"),
    ClientConnectionResetError("Cannot write to closing transport"),
    BrokenPipeError(),
    ConnectionAbortedError(),
    RuntimeError("unable to perform operation on <TCPTransport closed=True reading=False 0x1>; "
                 "the handler is closed"),        # uvloop
    RuntimeError("Transport is closing"),        # asyncio
    RuntimeError("WebSocket connection is closed."),
])
def test_every_way_a_client_leaves(exc):
    assert client_left(exc)


@pytest.mark.parametrize("exc", [
    RuntimeError("Cannot call write() after write_eof()"),
    ValueError("closed"),
    ApiError(500, "Internal", "no", code="internal"),
    TimeoutError(),
    OSError("disk full"),
    KeyboardInterrupt(),
])
def test_what_is_no_client_leaving(exc):
    assert not client_left(exc)


class _Gone(Frames):
    """A socket whose client stopped reading, then closed: the write in progress fails."""

    def __init__(self, life, turn, error: BaseException):
        super().__init__(life, turn)
        self.error = error

    async def write(self, frames: bytes) -> None:
        raise self.error


@pytest.mark.parametrize("error", [ConnectionError("Connection lost"),
                                   ClientConnectionResetError("Cannot write to closing transport"),
                                   RuntimeError("Transport is closing")])
async def test_a_turn_whose_write_fails_as_its_client_leaves_is_charged_its_reservation(store, error):  # noqa: F811
    turns = life(store)
    turn = await turns.prepare(stream=True)
    with pytest.raises(type(error)):
        await turns.runner.run(turn, _Gone(turns, turn, error))
    await turns.settler.drain()
    assert turn.outcome.abandoned and turn.outcome.result is None
    assert turns.quota.released == [RESERVED]   # no usage reported: its reservation, never 0
    assert turns.seen[-1] == f"finished {type(error).__name__}"


async def test_a_turn_that_fails_otherwise_is_not_abandoned(store):  # noqa: F811
    turns = life(store)
    turn = await turns.prepare(stream=True)
    with pytest.raises(ValueError):
        await turns.runner.run(turn, _Gone(turns, turn, ValueError("a bug")))
    await turns.settler.drain()
    assert not turn.outcome.abandoned
    assert turns.quota.released == [0]   # what it used: nothing (not the client's doing)


async def test_check_refuses_from_the_request_alone_and_admits_nothing(store):  # noqa: F811
    turns = life(store, customization={"disable_query_system_prompt": True})
    for raw, code in (({"input": "hi", "junk": 1}, None), ({"input": 3}, None),
                      ({"input": "hi", "instructions": "be brief"}, "system_prompt_disabled"),
                      ({"input": "hi", "background": True, "store": False}, "invalid_value"),
                      ({"input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["vs_x"]}]},
                       "vector_store_not_found"),
                      ({"input": "hi", "tools": [{"type": "mcp", "server_label": "mine",
                                                  "server_url": "https://mcp.example/sse"}]},
                       "mcp_server_not_allowed")):
        with pytest.raises(ApiError) as refused:
            await turns.preparer.check(USER, raw)
        assert 400 <= refused.value.status < 500 and (code is None or refused.value.code == code)
    await turns.preparer.check(USER, {"input": "hi", "store": False})   # a valid one passes
    assert turns.quota.reserved == [] and turns.backend.conversations_created == 0
    assert turns.preparer.in_progress.running(USER.user_id) == 0


async def test_an_interrupted_stream_is_recorded_with_its_partial_answer_and_charged_as_abandoned(store):  # noqa: F811
    turns = life(store)
    turn = await turns.prepare(stream=True)
    partial = {"id": "resp_cut", "object": "response", "created_at": 1, "status": "incomplete", "model": "fake/model",
               "output": [], "usage": None, "error": None, "incomplete_details": {"reason": "interrupted"}}
    turns.settler.interrupted(turn, partial, "the question")
    assert turn.outcome.result is partial and turn.outcome.abandoned
    assert not turn.outcome.append_to_upstream   # the gateway keeps this conversation: nothing to append upstream
    turns.settler.finish(turn)
    await turns.settler.drain()
    assert turns.quota.written == [("fake/model", RESERVED)]   # no usage: its reservation
    assert await turns.repository.find_turn("resp_cut") is not None
    # A turn that already ended otherwise is left as it was.
    other = await turns.prepare(stream=True)
    other.outcome.result = {"status": "completed"}   # as the settler recorded its end
    turns.settler.interrupted(other, partial, "q")
    assert other.outcome.result == {"status": "completed"} and not other.outcome.abandoned
    # One with nothing to show ends as any abandoned turn without a result.
    empty = await turns.prepare(stream=True)
    turns.settler.interrupted(empty, None, "q")
    assert empty.outcome.result is None
