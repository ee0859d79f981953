"""Transcripts (`user_data_collection.transcripts_enabled`, issue 22): one JSON file per
stored turn in LCORE's layout, `<transcripts_storage>/<sha256(user_id)>/<conversation
id>/<uuid4>.json`, with LCORE's keys (`metadata`, `redacted_query`, `query_is_valid`,
`llm_response`, `rag_chunks`, `truncated`, `attachments`, `tool_calls`,
`tool_results`).

Off the request's path: the runner's `settled` hook only builds the record and queues
it; one task hands what has queued to a worker thread, so a slow disk never delays an
answer. `close()` (at shutdown, after the turns are drained) writes everything queued:
nothing is lost when the process stops cleanly. A deleted conversation's transcripts
go with it (`forget`), after whatever was queued for it is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gateway.legacy.items import summaries
from gateway.storage.history import Deleted
from gateway.turns.content import answer_and_tools
from gateway.turns.hooks import TurnHooks
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.conversations")

_RECORDED = ("completed", "incomplete", "requires_action")   # the statuses a turn is recorded with


def user_directory(storage: Path, user_id: str) -> Path:
    return storage / hashlib.sha256(user_id.encode()).hexdigest()


def transcript(turn: Turn) -> dict[str, Any] | None:
    """LCORE's transcript of a settled, stored turn (None: not one that is kept)."""
    plan, outcome = turn.plan, turn.outcome
    result = outcome.result
    if not outcome.recorded or result is None or plan.conversation_id is None or result.get("status") not in _RECORDED:
        return None
    answer, items = answer_and_tools(result)
    calls, results, chunks = summaries(items)
    query_provider, query_model = named_model(plan.requested_model)
    return {"metadata": {"provider": plan.model.provider_id, "model": plan.model.id,
                         "query_provider": query_provider, "query_model": query_model,
                         "user_id": plan.identity.user_id, "conversation_id": plan.conversation_id,
                         "timestamp": datetime.now(timezone.utc).isoformat()},
            "redacted_query": plan.question, "query_is_valid": True, "llm_response": answer, "rag_chunks": chunks,
            "truncated": False, "attachments": list(plan.attachments), "tool_calls": calls, "tool_results": results}


def named_model(requested: str | None) -> tuple[str | None, str | None]:
    """LCORE's `query_provider`/`query_model`: what the request named (None when it named
    nothing: the default model is in `provider`/`model`), not what the turn chose."""
    if not requested:
        return None, None
    provider, slash, model = requested.partition("/")
    return (provider, model) if slash else (None, requested)


class Transcripts(TurnHooks):
    def __init__(self, storage: str):
        self._storage = Path(storage)
        self._queue: list[tuple[Path, dict[str, Any]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._closing = False
        self._lock = asyncio.Lock()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def settled(self, turn: Turn) -> None:
        record = transcript(turn)
        if record is None:
            return
        directory = user_directory(self._storage, turn.plan.identity.user_id) / str(turn.plan.conversation_id)
        self._queue.append((directory / f"{uuid.uuid4()}.json", record))
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await self.flush()
            if self._closing:
                return

    async def flush(self) -> None:
        """Write everything queued so far (one flusher at a time: waiting for the lock
        is waiting for the batch being written)."""
        async with self._lock:
            while self._queue:
                batch, self._queue = self._queue, []
                # Shielded: a request cancelled while it waits does not stop the write.
                await asyncio.shield(asyncio.to_thread(_write_all, self._storage, batch))

    async def forget(self, deleted: Deleted) -> None:
        """A deleted conversation's transcripts (after what was queued for it is written)."""
        await self.flush()
        directory = user_directory(self._storage, deleted.user_id) / deleted.conversation_id
        await asyncio.to_thread(shutil.rmtree, directory, True)

    async def close(self) -> None:
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
        await self.flush()


def _write_all(storage: Path, batch: list[tuple[Path, dict[str, Any]]]) -> None:
    for path, record in batch:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(record), encoding="utf-8")
            partial.replace(path)
        except OSError as exc:   # one unwritable transcript must not lose the others
            # The storage directory and the reason only: the file's path (and the
            # error's own text, which repeats it) holds the user id's unkeyed hash.
            log.error("writing a transcript under %s failed: %s", storage, exc.strerror or type(exc).__name__)
