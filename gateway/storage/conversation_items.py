"""OpenAI's Conversations API's own records (issue 23): a conversation's `metadata`,
and the items clients added, each `pending` until the conversation's next turn sent it
as its input. A conversation the gateway keeps (`llama_stack.conversations: gateway`,
and the local engine) keeps its items here after that; an upstream's conversation
holds them here only while they are pending (issue 41: Llama Stack 0.7.3 mis-orders
items added within seconds of each other), and they go (`discard`) once the upstream's
conversation has them from the turn that sent them.

Whether a conversation has pending items is asked by every turn that continues a
conversation the gateway keeps, so it must cost nothing in the usual case (none): this
process remembers which conversations have some (loaded once at start-up, kept as it
adds and takes them), which holds while it is the database's only writer (SQLite);
with several replicas on one PostgreSQL (`Database.shared`) it asks the database.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any

import orjson

from gateway.schema.json_types import JsonObject
from gateway.storage.database import Database


class ConversationItems:
    def __init__(self, db: Database):
        self._db = db
        self._pending: set[str] | None = None   # None: ask the database (shared, or not loaded)
        # Items being given back by a turn that just failed, by conversation: the next
        # turn here waits for them (its client may ask at once).
        self._restoring: dict[str, asyncio.Future[Any]] = {}

    async def load(self) -> None:
        """At start-up: which conversations have pending items (one process's database)."""
        if self._db.shared:
            return
        rows = await self._db.fetchall("SELECT DISTINCT conversation_id FROM gateway_conversation_items "
                                       "WHERE pending = 1")
        self._pending = {row["conversation_id"] for row in rows}

    # Metadata.

    async def metadata(self, conversation_id: str) -> dict[str, str] | None:
        """The client's metadata; None for a conversation never created through the API."""
        row = await self._db.fetchone("SELECT metadata FROM gateway_conversations WHERE id = :id",
                                      {"id": conversation_id})
        if row is None or row["metadata"] is None:
            return None
        metadata: dict[str, str] = orjson.loads(row["metadata"])
        return metadata

    async def set_metadata(self, conversation_id: str, metadata: dict[str, str]) -> bool:
        changed = await self._db.execute("UPDATE gateway_conversations SET metadata = :metadata WHERE id = :id",
                                         {"metadata": orjson.dumps(metadata).decode(), "id": conversation_id})
        return changed > 0

    # Items.

    async def add(self, conversation_id: str, items: list[JsonObject], pending: bool) -> None:
        """Append items (each already has its `id`) after the conversation's others."""
        if not items:
            return
        now = datetime.now(timezone.utc).isoformat()
        # Ordered by the clock (ns) plus the index: portable, and no read before the write.
        base = time.time_ns()
        await self._db.write([(
            "INSERT INTO gateway_conversation_items (conversation_id, id, position, item, pending, created_at) "
            "VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(items)),
            [v for index, item in enumerate(items)
             for v in (conversation_id, item["id"], base + index, orjson.dumps(item).decode(), int(pending), now)])])
        if pending and self._pending is not None:
            self._pending.add(conversation_id)

    async def count(self, conversation_id: str, pending_only: bool = False) -> int:
        row = await self._db.fetchone("SELECT COUNT(*) AS n FROM gateway_conversation_items "
                                      "WHERE conversation_id = :id" + (" AND pending = 1" if pending_only else ""),
                                      {"id": conversation_id})
        return int(row["n"]) if row else 0

    async def all(self, conversation_id: str, pending_only: bool = False) -> list[JsonObject]:
        """Its items (`pending_only`: those no turn has sent yet), oldest first."""
        rows = await self._db.fetchall("SELECT item FROM gateway_conversation_items WHERE conversation_id = :id "
                                       + ("AND pending = 1 " if pending_only else "") + "ORDER BY position",
                                       {"id": conversation_id})
        return [orjson.loads(row["item"]) for row in rows]

    async def get(self, conversation_id: str, item_id: str, pending_only: bool = False) -> JsonObject | None:
        row = await self._db.fetchone("SELECT item FROM gateway_conversation_items WHERE conversation_id = :cid "
                                      "AND id = :id" + (" AND pending = 1" if pending_only else ""),
                                      {"cid": conversation_id, "id": item_id})
        return orjson.loads(row["item"]) if row else None

    async def delete(self, conversation_id: str, item_id: str, pending_only: bool = False) -> bool:
        return await self._db.execute("DELETE FROM gateway_conversation_items WHERE conversation_id = :cid "
                                      "AND id = :id" + (" AND pending = 1" if pending_only else ""),
                                      {"cid": conversation_id, "id": item_id}) > 0

    async def discard(self, conversation_id: str, item_ids: tuple[str, ...]) -> None:
        """Items a recorded turn sent to an upstream's conversation, which holds them now
        (those still pending, given back meanwhile, stay)."""
        if not item_ids:
            return
        marks = ", ".join(f":i{index}" for index in range(len(item_ids)))
        await self._db.execute(
            f"DELETE FROM gateway_conversation_items WHERE conversation_id = :id AND pending = 0 "
            f"AND id IN ({marks})", {"id": conversation_id, **{f"i{index}": item_id for index, item_id in
                                                               enumerate(item_ids)}})

    async def take_pending(self, conversation_id: str) -> list[JsonObject]:
        """The items added since the conversation's last turn, marked sent (a turn sends
        them as its input; one that is not recorded gives them back: `restore`)."""
        restoring = self._restoring.get(conversation_id)
        if restoring is not None:
            await asyncio.shield(restoring)
        if self._pending is not None and conversation_id not in self._pending:
            return []
        async with self._db.transaction() as tx:
            rows = await tx.fetchall("SELECT item FROM gateway_conversation_items WHERE conversation_id = :id "
                                     "AND pending = 1 ORDER BY position", {"id": conversation_id})
            if rows:
                await tx.execute("UPDATE gateway_conversation_items SET pending = 0 WHERE conversation_id = :id "
                                 "AND pending = 1", {"id": conversation_id})
        if self._pending is not None:
            self._pending.discard(conversation_id)
        return [orjson.loads(row["item"]) for row in rows]

    def restore_soon(self, conversation_id: str, item_ids: tuple[str, ...]) -> asyncio.Future[Any]:
        """`restore`, from a synchronous caller (`Settler.give_back`); the conversation's next
        `take_pending` waits for it."""
        task = asyncio.ensure_future(self.restore(conversation_id, item_ids))
        self._restoring[conversation_id] = task

        def done(_: asyncio.Future[Any]) -> None:
            if self._restoring.get(conversation_id) is task:
                del self._restoring[conversation_id]

        task.add_done_callback(done)
        return task

    async def restore(self, conversation_id: str, item_ids: tuple[str, ...]) -> None:
        """Items a turn took that it did not get recorded with: pending again, for the
        conversation's next turn (as OpenAI's conversation keeps them)."""
        if not item_ids:
            return
        marks = ", ".join(f":i{index}" for index in range(len(item_ids)))
        changed = await self._db.execute(
            f"UPDATE gateway_conversation_items SET pending = 1 WHERE conversation_id = :id AND id IN ({marks})",
            {"id": conversation_id, **{f"i{index}": item_id for index, item_id in enumerate(item_ids)}})
        if changed and self._pending is not None:
            self._pending.add(conversation_id)

    def forget(self, conversation_id: str) -> None:
        """A deleted conversation (its rows went in the deleting transaction)."""
        if self._pending is not None:
            self._pending.discard(conversation_id)
