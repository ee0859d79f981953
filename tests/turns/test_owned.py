"""`OwnedTurns`: recorded turns read back after any record of the same key still being
committed in this process, and only the caller's (another user's is None, as a missing
one)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from gateway.identity import Identity
from gateway.turns.owned import OwnedTurns


class Repository:
    def __init__(self) -> None:
        self.turns: dict[str, tuple[object, object]] = {}
        self.conversations: dict[str, object] = {}

    async def find_turn(self, response_id: str):
        return self.turns.get(response_id)

    async def get(self, conversation_id: str):
        return self.conversations.get(conversation_id)


class Pending:
    """The settler's side: which keys are being recorded, and waiting for them."""

    def __init__(self) -> None:
        self.recording: dict[str, asyncio.Future[None]] = {}

    def pending(self, key: str) -> bool:
        return key in self.recording

    async def wait_pending(self, key: str | None) -> None:
        if key in self.recording:
            await self.recording[key]


def _identity(user_id: str) -> Identity:
    return Identity(user_id=user_id, username=user_id)


async def test_only_the_callers_turns_and_after_their_record():
    repository, pending = Repository(), Pending()
    owned = OwnedTurns(repository, pending)  # type: ignore[arg-type]
    record = SimpleNamespace(tokens=7)
    recording = asyncio.get_running_loop().create_future()
    pending.recording["resp_1"] = recording
    asked = asyncio.ensure_future(owned.owned(_identity("alice"), "resp_1"))
    await asyncio.sleep(0)
    assert not asked.done()   # waits for the record being committed
    repository.turns["resp_1"] = (record, SimpleNamespace(user_id="alice"))
    recording.set_result(None)
    assert await asked is record
    assert await owned.owned(_identity("bob"), "resp_1") is None
    assert await owned.owned(_identity("alice"), "resp_missing") is None
    assert await owned.tokens("resp_1") == 7 and await owned.tokens("resp_missing") == 0


async def test_a_conversation_is_read_again_when_a_later_turn_is_being_recorded():
    repository, pending = Repository(), Pending()
    owned = OwnedTurns(repository, pending)  # type: ignore[arg-type]
    before, after = SimpleNamespace(id="c1", last_response_id="resp_1"), SimpleNamespace(id="c1",
                                                                                       last_response_id="resp_2")
    assert await owned.latest(before) is before   # nothing being recorded: as it is
    recording = asyncio.get_running_loop().create_future()
    pending.recording["c1"] = recording
    repository.conversations["c1"] = after
    recording.set_result(None)
    assert await owned.latest(before) is after
    assert await owned.conversation("c1") is after
