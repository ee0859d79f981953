"""The conversations repository: who owns which conversation, and its turns.

The content of a conversation (messages, tool items) lives upstream; the gateway keeps
what it needs to decide: the owner, the upstream id, the last model and response, and
one row per turn so a response id can be traced to its conversation and owner.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.storage.database import Database


@dataclass(frozen=True)
class ConversationRecord:
    id: str
    user_id: str
    upstream_id: str | None
    created_at: str
    last_message_at: str
    last_used_model: str | None
    last_used_provider: str | None
    last_response_id: str | None
    message_count: int
    topic_summary: str
    generate_topic_summary: bool


@dataclass(frozen=True)
class TurnRecord:
    conversation_id: str
    response_id: str
    previous_response_id: str | None
    model: str | None
    provider: str | None
    status: str
    started_at: str
    completed_at: str
    turn_number: int = 0


def _conversation(row: dict) -> ConversationRecord:
    return ConversationRecord(**{**row, "generate_topic_summary": bool(row["generate_topic_summary"])})


class ConversationRepository:
    def __init__(self, db: Database):
        self._db = db

    async def get(self, conversation_id: str) -> ConversationRecord | None:
        row = await self._db.fetchone("SELECT * FROM conversations WHERE id = :id", {"id": conversation_id})
        return _conversation(row) if row else None

    async def find_turn(self, response_id: str) -> tuple[TurnRecord, ConversationRecord] | None:
        row = await self._db.fetchone("SELECT * FROM turns WHERE response_id = :id", {"id": response_id})
        if row is None:
            return None
        conversation = await self.get(row["conversation_id"])
        return (TurnRecord(**row), conversation) if conversation else None

    async def save(self, conversation: ConversationRecord, turn: TurnRecord | None) -> None:
        """Create the conversation if it is new, then append the turn, atomically."""
        async with self._db.transaction() as tx:
            await tx.execute(
                "INSERT INTO conversations (id, user_id, upstream_id, created_at, last_message_at, "
                "last_used_model, last_used_provider, message_count, topic_summary, generate_topic_summary) "
                "VALUES (:id, :user_id, :upstream_id, :created_at, :last_message_at, :last_used_model, "
                ":last_used_provider, 0, '', :generate_topic_summary) ON CONFLICT (id) DO NOTHING",
                {"id": conversation.id, "user_id": conversation.user_id,
                 "upstream_id": conversation.upstream_id, "created_at": conversation.created_at,
                 "last_message_at": conversation.last_message_at,
                 "last_used_model": conversation.last_used_model,
                 "last_used_provider": conversation.last_used_provider,
                 "generate_topic_summary": int(conversation.generate_topic_summary)})
            if turn is None:
                return
            await tx.execute(
                "INSERT INTO turns (conversation_id, turn_number, response_id, previous_response_id, model, "
                "provider, status, started_at, completed_at) VALUES (:cid, (SELECT COALESCE(MAX(turn_number), 0) "
                "+ 1 FROM turns WHERE conversation_id = :cid), :rid, :prev, :model, :provider, :status, "
                ":started, :completed)",
                {"cid": turn.conversation_id, "rid": turn.response_id, "prev": turn.previous_response_id,
                 "model": turn.model, "provider": turn.provider, "status": turn.status,
                 "started": turn.started_at, "completed": turn.completed_at})
            await tx.execute(
                "UPDATE conversations SET last_message_at = :at, last_used_model = :model, "
                "last_used_provider = :provider, last_response_id = :rid, message_count = message_count + 1 "
                "WHERE id = :cid",
                {"at": turn.completed_at, "model": turn.model, "provider": turn.provider,
                 "rid": turn.response_id, "cid": turn.conversation_id})

    async def delete_turn(self, response_id: str) -> None:
        """Forget a deleted response; the conversation then continues from its previous turn."""
        async with self._db.transaction() as tx:
            row = await tx.fetchone("SELECT conversation_id FROM turns WHERE response_id = :rid", {"rid": response_id})
            if row is None:
                return
            await tx.execute("DELETE FROM turns WHERE response_id = :rid", {"rid": response_id})
            await tx.execute(
                "UPDATE conversations SET message_count = message_count - 1, last_response_id = "
                "(SELECT response_id FROM turns WHERE conversation_id = :cid ORDER BY turn_number DESC LIMIT 1) "
                "WHERE id = :cid", {"cid": row["conversation_id"]})
