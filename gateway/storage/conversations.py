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
        row = await self._db.fetchone(
            "SELECT t.conversation_id AS t_conversation_id, t.turn_number AS t_turn_number, "
            "t.response_id AS t_response_id, t.previous_response_id AS t_previous_response_id, t.model AS t_model, "
            "t.provider AS t_provider, t.status AS t_status, t.started_at AS t_started_at, "
            "t.completed_at AS t_completed_at, c.* FROM turns t JOIN conversations c ON c.id = t.conversation_id "
            "WHERE t.response_id = :id", {"id": response_id})
        if row is None:
            return None
        turn = TurnRecord(**{key[2:]: value for key, value in row.items() if key.startswith("t_")})
        return turn, _conversation({key: value for key, value in row.items() if not key.startswith("t_")})

    async def save(self, conversation: ConversationRecord, turn: TurnRecord | None) -> None:
        await self.save_many([(conversation, turn)])

    async def save_many(self, entries: list[tuple[ConversationRecord, TurnRecord | None]]) -> None:
        """Create new conversations and append turns, all in one transaction (group commit:
        a few database round trips for the whole batch instead of several per turn)."""
        turns = [{"cid": t.conversation_id, "rid": t.response_id, "prev": t.previous_response_id,
                  "model": t.model, "provider": t.provider, "status": t.status, "started": t.started_at,
                  "completed": t.completed_at} for _, t in entries if t is not None]
        # One upsert per entry: a new conversation is created with its first turn counted,
        # an existing one gets its last-turn fields; an entry without a turn (a failed
        # first turn) only makes sure the conversation exists.
        conversations = [{"id": c.id, "user_id": c.user_id, "upstream_id": c.upstream_id,
                          "created_at": c.created_at, "last_message_at": t.completed_at if t else c.last_message_at,
                          "model": c.last_used_model, "provider": c.last_used_provider,
                          "rid": t.response_id if t else None, "turns": 1 if t else 0,
                          "summary": int(c.generate_topic_summary)} for c, t in entries]
        async with self._db.transaction() as tx:
            await tx.executemany(
                "INSERT INTO conversations AS c (id, user_id, upstream_id, created_at, last_message_at, "
                "last_used_model, last_used_provider, last_response_id, message_count, topic_summary, "
                "generate_topic_summary) VALUES (:id, :user_id, :upstream_id, :created_at, :last_message_at, "
                ":model, :provider, :rid, :turns, '', :summary) "
                "ON CONFLICT (id) DO UPDATE SET last_message_at = excluded.last_message_at, "
                "last_used_model = excluded.last_used_model, last_used_provider = excluded.last_used_provider, "
                "last_response_id = excluded.last_response_id, message_count = c.message_count + 1 "
                "WHERE excluded.message_count > 0", conversations)
            # Rows run in order, so turns of one conversation in one batch number up correctly.
            await tx.executemany(
                "INSERT INTO turns (conversation_id, turn_number, response_id, previous_response_id, model, "
                "provider, status, started_at, completed_at) VALUES (:cid, (SELECT COALESCE(MAX(turn_number), 0) "
                "+ 1 FROM turns WHERE conversation_id = :cid), :rid, :prev, :model, :provider, :status, "
                ":started, :completed)", turns)

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
