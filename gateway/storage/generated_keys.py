"""Secrets the gateway makes for itself once and keeps in the database every replica and
worker shares (issue 44: the compaction key when the operator configured none), in the
`gateway_settings` table: the first process to ask creates the value, every later one
(and every restart) reads that same value, whoever wins a race."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

import orjson

from gateway.schema.json_types import JsonObject
from gateway.storage.database import Database


class GeneratedKeys:
    def __init__(self, db: Database):
        self._db = db

    async def get(self, name: str) -> JsonObject | None:
        row = await self._db.fetchone("SELECT value FROM gateway_settings WHERE name = :name", {"name": name})
        if row is None:
            return None
        value: JsonObject = orjson.loads(row["value"])
        return value

    async def get_or_create(self, name: str, make: Callable[[], JsonObject]) -> JsonObject:
        """The stored value of `name`; made by `make` and stored if there was none. A
        concurrent creator's value wins over ours when it committed first (the insert
        does nothing then), so all agree on one."""
        await self._db.execute(
            "INSERT INTO gateway_settings (name, value, updated_by, updated_at) VALUES (:name, :value, :by, :at) "
            "ON CONFLICT (name) DO NOTHING",
            {"name": name, "value": orjson.dumps(make()).decode(), "by": "gateway",
             "at": datetime.now(timezone.utc).isoformat()})
        stored = await self.get(name)
        assert stored is not None, f"{name} was just stored"
        return stored
