"""Conversations as their owners see them (issue 22): the list, a conversation's stored
turns with what they said (the turn store: `gateway_turns.content`), the topic summary's
rename, and deleting a conversation with everything the gateway keeps for it.

Deleting is a claim: the conversation's row is deleted in the transaction that deletes
its turns and the responses the gateway kept for them (the engine's store, background
runs), and only the caller whose statement deleted the row is told it did, so two
replicas deleting one conversation (a client and an expiry sweep) delete it once.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

import orjson

from gateway.storage.conversations import ConversationRecord, ConversationRepository
from gateway.storage.database import Database, Row, Transaction

# A conversation's turns without an index on their conversation id (one per turn would
# cost every turn a random B-tree write, ~5 % of its CPU): each turn's row links the turn
# recorded before it (`prior_response_id`), so the walk from the conversation's latest
# turn is one response-id index lookup per turn. Deleted responses stay on the chain
# (marked); a deleted latest turn leaves it, its content cleared (`delete_turn`).
_CHAIN = ("WITH RECURSIVE chain(response_id) AS ("
          "SELECT last_response_id FROM gateway_conversations WHERE id = :id AND last_response_id IS NOT NULL "
          "UNION SELECT t.prior_response_id FROM gateway_turns t JOIN chain c ON t.response_id = c.response_id "
          "WHERE t.prior_response_id IS NOT NULL) ")
_LIST_COLUMNS = ("id, user_id, created_at, last_message_at, message_count, last_used_model, last_used_provider, "
                 "topic_summary")


@dataclass(frozen=True, slots=True)
class StoredTurn:
    response_id: str
    model: str | None
    provider: str | None
    started_at: str
    completed_at: str
    content: str | None     # `turns/content.py`


@dataclass(frozen=True, slots=True)
class Deleted:
    """What a deletion removed: the conversation's upstream id and its turns' response
    ids (their upstream state is the backend's to delete)."""

    conversation_id: str
    user_id: str
    upstream_id: str | None
    response_ids: tuple[str, ...]


def expired(last_message_at: str, ttl: int | None, now: datetime | None = None) -> bool:
    """Whether a conversation last used at `last_message_at` (ISO-8601) is past the TTL."""
    if ttl is None:
        return False
    try:
        last = datetime.fromisoformat(last_message_at)
    except ValueError:
        return False
    if last.tzinfo is None:
        last = last.replace(tzinfo=timezone.utc)
    return last < (now or datetime.now(timezone.utc)) - timedelta(seconds=ttl)


class ConversationHistory:
    def __init__(self, db: Database, conversations: ConversationRepository,
                 expired: Callable[[str], bool] | None = None):
        self._db = db
        self._conversations = conversations
        # Whether a conversation last used then is past its idle TTL (conversation expiry):
        # such a one is unknown here before the sweep deletes it.
        self._expired = expired

    async def get(self, conversation_id: str) -> ConversationRecord | None:
        record = await self._conversations.get(conversation_id)
        if record is not None and self._expired is not None and self._expired(record.last_message_at):
            return None
        return record

    async def list(self, user_id: str | None, limit: int | None = None, after: str | None = None) -> list[Row]:
        """Conversations newest first (by creation, then id): one user's, or everyone's
        (`user_id` None); `after`: only those listed after this conversation."""
        where, params = [], {}
        if user_id is not None:
            where.append("user_id = :user")
            params["user"] = user_id
        if after is not None:
            anchor = await self._db.fetchone("SELECT created_at FROM gateway_conversations WHERE id = :id",
                                             {"id": after})
            if anchor is None:
                return []
            where.append("(created_at < :at OR (created_at = :at AND id < :id))")
            params.update(at=anchor["created_at"], id=after)
        sql = f"SELECT {_LIST_COLUMNS} FROM gateway_conversations"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None and self._expired is None:
            sql += f" LIMIT {int(limit)}"
        rows = await self._db.fetchall(sql, params)
        if self._expired is not None:   # rare (expiry is off by default): filtered here, portably
            rows = [row for row in rows if not self._expired(row["last_message_at"])][:limit]
        return rows

    async def turns(self, conversation_id: str) -> builtins.list[StoredTurn]:
        """The conversation's recorded turns in order (deleted responses left out)."""
        rows = await self._db.fetchall(
            _CHAIN + "SELECT t.response_id, t.model, t.provider, t.started_at, t.completed_at, t.content "
            "FROM gateway_turns t JOIN chain c ON t.response_id = c.response_id WHERE t.deleted = 0 "
            "ORDER BY t.turn_number", {"id": conversation_id})
        return [StoredTurn(**row) for row in rows]

    async def rename(self, conversation_id: str, topic_summary: str) -> bool:
        """Set the topic summary; False when there is no such conversation."""
        changed = await self._db.execute("UPDATE gateway_conversations SET topic_summary = :summary WHERE id = :id",
                                         {"summary": topic_summary, "id": conversation_id})
        self._conversations.forget(conversation_id)
        return changed > 0

    async def delete(self, conversation_id: str, idle_before: str | None = None) -> Deleted | None:
        """Delete the conversation and what is stored for it, if this call is the one that
        deletes its row (None: there was none, or another caller deleted it first).
        `idle_before`: only if its last turn is older than this time (an expiry sweep:
        a conversation continued meanwhile is kept)."""
        async with self._db.transaction() as tx:
            row = await tx.fetchone("SELECT user_id, upstream_id FROM gateway_conversations WHERE id = :id",
                                    {"id": conversation_id})
            if row is None:
                return None
            claim = "DELETE FROM gateway_conversations WHERE id = :id"
            params: dict[str, str] = {"id": conversation_id}
            if idle_before is not None:
                claim += " AND last_message_at < :before"
                params["before"] = idle_before
            # Its turns, read before the row the walk starts from is deleted.
            turns = await tx.fetchall(_CHAIN + "SELECT response_id FROM chain", {"id": conversation_id})
            if await tx.execute(claim, params) == 0:
                return None
            response_ids = tuple(turn["response_id"] for turn in turns)
            # The items clients added through OpenAI's Conversations API (issue 23).
            await tx.execute("DELETE FROM gateway_conversation_items WHERE conversation_id = :id",
                             {"id": conversation_id})
            for response_id in response_ids:
                await _delete_responses(tx, response_id)
            # Its upstream state is deleted after the commit; until confirmed, it is pending.
            now = datetime.now(timezone.utc).isoformat()
            await tx.execute(
                "INSERT INTO gateway_deleted_conversations (conversation_id, upstream_id, response_ids, "
                "upstream_pending, attempted_at, deleted_at) VALUES (:id, :upstream, :responses, 1, :at, :at) "
                "ON CONFLICT (conversation_id) DO UPDATE SET upstream_id = excluded.upstream_id, "
                "response_ids = excluded.response_ids, upstream_pending = 1, attempted_at = excluded.attempted_at, "
                "deleted_at = excluded.deleted_at",
                {"id": conversation_id, "upstream": row["upstream_id"], "responses": orjson.dumps(response_ids).decode(),
                 "at": now})
        self._conversations.forget(conversation_id, response_ids)
        return Deleted(conversation_id, row["user_id"], row["upstream_id"], response_ids)

    async def upstream_deleted(self, conversation_id: str) -> None:
        """Its upstream state is gone: nothing is pending for it (its tombstone stays)."""
        await self._db.execute("UPDATE gateway_deleted_conversations SET upstream_pending = 0 "
                               "WHERE conversation_id = :id", {"id": conversation_id})

    async def resurrected(self, limit: int = 100) -> builtins.list[str]:
        """Deleted conversations that exist again: a turn still running when its
        conversation was deleted recorded it anew (ids are the gateway's, never reused)."""
        rows = await self._db.fetchall(
            f"SELECT c.id FROM gateway_conversations c JOIN gateway_deleted_conversations d "
            f"ON d.conversation_id = c.id LIMIT {int(limit)}")
        return [row["id"] for row in rows]

    async def prune(self, deleted_before: str) -> None:
        """Forget tombstones older than any turn can run (their upstream state gone)."""
        await self._db.execute("DELETE FROM gateway_deleted_conversations WHERE upstream_pending = 0 "
                               "AND deleted_at < :before", {"before": deleted_before})

    async def pending(self, attempted_before: str, now: str, limit: int = 100) -> builtins.list[Deleted]:
        """Upstream state whose deletion was last attempted before `attempted_before`,
        leased to this caller (its attempt time set to `now`, so another replica leaves
        it alone until that is old too)."""
        rows = await self._db.fetchall(
            f"SELECT conversation_id, upstream_id, response_ids, attempted_at FROM gateway_deleted_conversations "
            f"WHERE upstream_pending = 1 AND attempted_at < :before ORDER BY attempted_at LIMIT {int(limit)}",
            {"before": attempted_before})
        leased = []
        for row in rows:
            taken = await self._db.execute(
                "UPDATE gateway_deleted_conversations SET attempted_at = :now WHERE conversation_id = :id "
                "AND upstream_pending = 1 AND attempted_at = :was", {"now": now, "id": row["conversation_id"], "was": row["attempted_at"]})
            if taken:
                leased.append(Deleted(row["conversation_id"], "", row["upstream_id"],
                                      tuple(orjson.loads(row["response_ids"]))))
        return leased

    async def pending_one(self, conversation_id: str, now: str) -> Deleted | None:
        """That conversation's upstream state, if its deletion is still pending, leased
        to this caller whenever it was last attempted (a client deleting it again)."""
        row = await self._db.fetchone(
            "SELECT upstream_id, response_ids, attempted_at FROM gateway_deleted_conversations "
            "WHERE conversation_id = :id AND upstream_pending = 1", {"id": conversation_id})
        if row is None:
            return None
        taken = await self._db.execute(
            "UPDATE gateway_deleted_conversations SET attempted_at = :now WHERE conversation_id = :id "
            "AND upstream_pending = 1 AND attempted_at = :was", {"now": now, "id": conversation_id,
                                                               "was": row["attempted_at"]})
        if not taken:
            return None
        return Deleted(conversation_id, "", row["upstream_id"], tuple(orjson.loads(row["response_ids"])))

    async def idle(self, before: str, limit: int = 100) -> builtins.list[str]:
        """Conversations without a turn since `before` (the expiry sweep's candidates)."""
        rows = await self._db.fetchall(
            f"SELECT id FROM gateway_conversations WHERE last_message_at < :before ORDER BY last_message_at "
            f"LIMIT {int(limit)}", {"before": before})
        return [row["id"] for row in rows]


async def _delete_responses(tx: Transaction, response_id: str) -> None:
    """What the gateway keeps of one turn: its row, the engine's stored response and a
    background run's row and events."""
    for sql in ("DELETE FROM gateway_turns WHERE response_id = :id",
                "DELETE FROM gateway_responses WHERE id = :id",
                "DELETE FROM gateway_background_events WHERE response_id = :id",
                "DELETE FROM gateway_background WHERE id = :id"):
        await tx.execute(sql, {"id": response_id})
