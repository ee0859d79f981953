"""Reading recorded turns (`OwnedTurns`): the turn store as the backends, `prepare()` and
the service read it, after any record of the same conversation or response still being
committed in this process (`Settler.wait_pending`), so a request that follows a turn at
once reads that turn. The `Settler` writes records; this only reads them."""

from __future__ import annotations

from gateway.identity import Identity
from gateway.storage.conversations import ConversationRecord, ConversationRepository, TurnRecord
from gateway.turns.settle import Settler


class OwnedTurns:
    def __init__(self, conversations: ConversationRepository, settler: Settler):
        self._conversations = conversations
        self._settler = settler

    async def owned(self, identity: Identity, response_id: str) -> TurnRecord | None:
        """The recorded turn behind a response id, if it belongs to the caller."""
        found = await self.turn(response_id)
        if found is None or found[1].user_id != identity.user_id:
            return None
        return found[0]

    async def turn(self, response_id: str) -> tuple[TurnRecord, ConversationRecord] | None:
        """The recorded turn behind a response id and its conversation, whoever owns them."""
        await self._settler.wait_pending(response_id)
        return await self._conversations.find_turn(response_id)

    async def conversation(self, conversation_id: str) -> ConversationRecord | None:
        """A stored conversation, with the turn of it being recorded here (if any)."""
        await self._settler.wait_pending(conversation_id)
        return await self._conversations.get(conversation_id)

    async def latest(self, conversation: ConversationRecord) -> ConversationRecord:
        """The conversation again if a later turn of it is being recorded here (whether
        a turn continues it or forks from it depends on that turn), else as it is."""
        if not self._settler.pending(conversation.id):
            return conversation
        return await self.conversation(conversation.id) or conversation

    async def tokens(self, response_id: str) -> int:
        """The reported input + output tokens of a recorded turn (0: none is)."""
        found = await self._conversations.find_turn(response_id)
        return found[0].tokens if found is not None else 0

    async def wait(self, key: str) -> None:
        """Until the turn of this conversation or response being recorded here (if any)
        is recorded (another replica's are committed before their client hears)."""
        await self._settler.wait_pending(key)
