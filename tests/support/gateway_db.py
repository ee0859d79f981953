"""Read a running gateway's own SQLite database, read-only, from a test.

The gateway commits a turn before the client gets its answer, through one group-commit
writer (first in first out) that also records turns whose client went away; so a check
that something was NOT recorded first calls `flush()`: it makes one turn as a
throwaway user and waits for that turn's row, and every turn the gateway finished
before it is then on disk too.

    db = GatewayDb.of(gateway)
    reply = gateway.post("/v1/responses?user_id=mallory", {...})   # refused
    db.flush()
    assert db.counts(user_id="mallory") == Counts(conversations=0, turns=0)

    db.wait_for_turn(response_id)        # the row of a turn (waits for the writer)
    db.conversation("conv_…")            # a conversations row (either id form), or None
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.gateway_proc import Gateway

BARRIER_USER = "gateway-db-flush"


@dataclass(frozen=True)
class Counts:
    conversations: int
    turns: int


class GatewayDb:
    def __init__(self, path: Path, gateway: Gateway | None = None):
        self.path = Path(path)
        self._gateway = gateway

    @classmethod
    def of(cls, gateway: Gateway) -> "GatewayDb":
        """The database the gateway's config file names (`database.sqlite.db_path`)."""
        config = yaml.safe_load(gateway.config_path.read_text())
        return cls(Path(config["database"]["sqlite"]["db_path"]), gateway)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        # A fresh read-only connection per query: always the latest committed state.
        with closing(sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(sql, params)]

    def counts(self, user_id: str | None = None) -> Counts:
        """Rows in `conversations` and `turns`: all of them, or those of one user."""
        if user_id is None:
            conversations = self._query("SELECT COUNT(*) AS n FROM gateway_conversations")[0]["n"]
            turns = self._query("SELECT COUNT(*) AS n FROM gateway_turns")[0]["n"]
        else:
            conversations = self._query("SELECT COUNT(*) AS n FROM gateway_conversations WHERE user_id = ?",
                                        (user_id,))[0]["n"]
            turns = self._query("SELECT COUNT(*) AS n FROM gateway_turns WHERE conversation_id IN "
                                "(SELECT id FROM gateway_conversations WHERE user_id = ?)", (user_id,))[0]["n"]
        return Counts(conversations=conversations, turns=turns)

    def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        """The conversations row, by `conv_<48 hex>` or the bare stored id."""
        rows = self._query("SELECT * FROM gateway_conversations WHERE id = ?", (conversation_id.removeprefix("conv_"),))
        return rows[0] if rows else None

    def turn(self, response_id: str) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM gateway_turns WHERE response_id = ?", (response_id,))
        return rows[0] if rows else None

    def wait_for_turn(self, response_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The turn's row once the gateway's writer has committed it."""
        deadline = time.monotonic() + timeout
        while (row := self.turn(response_id)) is None:
            assert time.monotonic() < deadline, f"turn {response_id} was not recorded within {timeout} s"
            time.sleep(0.02)
        return row

    def flush(self, headers: dict[str, str] | None = None, **body: Any) -> None:
        """Wait until every turn the gateway finished so far is recorded (see module doc).

        `headers`: what the gateway's authentication needs (e.g. a bearer token); `body`:
        fields the barrier turn needs on this gateway (e.g. `model=` without a default)."""
        assert self._gateway is not None, "flush() needs GatewayDb.of(gateway)"
        reply = self._gateway.post(f"/v1/responses?user_id={BARRIER_USER}",
                                   {"input": f"flush {uuid.uuid4().hex}", "tool_choice": "none", **body},
                                   headers=headers)
        assert reply.status == 200, reply.body
        self.wait_for_turn(reply.json()["id"])
