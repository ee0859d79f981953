"""Interrupting a streaming query that runs in another process sharing the database:
replicas on one PostgreSQL (LISTEN/NOTIFY, nothing written per stream) or workers on
one SQLite file (a table, polled).

The process that gets `POST /v1/streaming_query/interrupt` for a stream it does not
run asks every other one (`{"id", "user", "ask"}`); the one that runs (or recently
ran) it answers (`{"ask", "outcome"}`: `interrupted`, `finished` or `forbidden`) after
it has cancelled the stream's task, and the 200 is sent then. No answer within the
answer timeout: no process knows the stream, LCORE's 404.

- PostgreSQL: asked on `gateway_stream_interrupt`, answered on
  `gateway_stream_interrupted`.
- SQLite (`storage/stream_interrupts.py`): the question is a row; a process looks for
  questions every `POLL` while it runs streams, and for `GRACE` after its last one
  ended (so a stream that finished there is still LCORE's 200 `interrupted: false`),
  and answers in the row, which the asker polls. An idle process reads nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Awaitable, Callable

import orjson

from gateway.legacy.interrupts import StreamRegistry
from gateway.storage.stream_interrupts import StreamInterruptsStore

log = logging.getLogger("gateway.legacy")

ASK = "gateway_stream_interrupt"
ANSWER = "gateway_stream_interrupted"
ANSWER_TIMEOUT = 1.0   # seconds: NOTIFY reaches listeners in milliseconds
POLLED_TIMEOUT = 2.0   # seconds, on SQLite: a few polls, under a busy file
POLL = 0.1             # seconds between looks for questions (SQLite, while streams run)
ASKER_POLL = 0.05      # seconds between looks for the answer (SQLite)
GRACE = 60.0           # seconds after a process's last stream it still looks


class RemoteInterrupts:
    def __init__(self, db: Any, registry: StreamRegistry):
        self._db = db
        self._registry = registry
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._stops: list[Callable[[], Awaitable[None]]] = []
        self._table: StreamInterruptsStore | None = None   # SQLite shared by workers
        self._poller: asyncio.Task[Any] | None = None
        # Answers being sent, held until sent: the event loop keeps only weak references.
        self._answering: set[asyncio.Task[Any]] = set()

    @property
    def enabled(self) -> bool:
        return bool(self._stops) or self._table is not None

    async def start(self) -> None:
        """Listen where the database can (PostgreSQL); poll a table where workers share
        a SQLite file; else interrupts stay in-process."""
        if hasattr(self._db, "listen"):
            self._stops.append(await self._db.listen(ASK, self._asked))
            self._stops.append(await self._db.listen(ANSWER, self._answered))
        elif getattr(self._db, "shared", False):
            self._table = StreamInterruptsStore(self._db)
            self._poller = asyncio.ensure_future(self._poll())

    async def close(self) -> None:
        while self._stops:
            await self._stops.pop()()
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)

    async def ask(self, request_id: str, user_id: str) -> str | None:
        """The outcome from the process that has the stream, or None if none has it."""
        ask = uuid.uuid4().hex
        if self._table is not None:
            return await self._ask_table(self._table, ask, request_id, user_id)
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting[ask] = answer
        try:
            await self._db.notify(ASK, orjson.dumps({"id": request_id, "user": user_id, "ask": ask}).decode())
            async with asyncio.timeout(ANSWER_TIMEOUT):
                return await answer
        except TimeoutError:
            return None
        finally:
            self._waiting.pop(ask, None)

    async def _ask_table(self, table: StreamInterruptsStore, ask: str, request_id: str, user_id: str) -> str | None:
        self._waiting[ask] = asyncio.get_running_loop().create_future()   # never its own to answer
        try:
            await table.ask(ask, request_id, user_id, _now_ms())
            deadline = time.monotonic() + POLLED_TIMEOUT
            while time.monotonic() < deadline:
                await asyncio.sleep(ASKER_POLL)
                if (outcome := await table.outcome(ask)) is not None:
                    return outcome
            return None
        finally:
            self._waiting.pop(ask, None)
            await asyncio.shield(table.forget(ask, _now_ms()))

    async def _poll(self) -> None:
        table = self._table
        assert table is not None
        last_busy = -GRACE
        while True:
            await asyncio.sleep(POLL)
            now = time.monotonic()
            if self._registry.running():
                last_busy = now
            elif now - last_busy >= GRACE:
                continue   # no stream here lately: nothing to answer for
            try:
                for ask, request_id, user_id in await table.unanswered(_now_ms() - int(POLLED_TIMEOUT * 1000)):
                    if ask not in self._waiting and (outcome := self._outcome(request_id, user_id)) is not None:
                        await table.answer(ask, outcome)
            except Exception as exc:   # the database is busy or down: the next poll tries again
                log.warning("looking for interrupt requests failed: %s", exc)

    def _outcome(self, request_id: str, user_id: str) -> str | None:
        """What this process does with a question about `request_id`: None, not its stream."""
        owner = self._registry.owner(request_id)
        if owner is None:
            return None
        if owner != user_id:
            return "forbidden"
        return "interrupted" if self._registry.interrupt(request_id, user_id) else "finished"

    def _asked(self, payload: str) -> None:
        try:
            message = orjson.loads(payload)
            request_id, user_id, ask = str(message["id"]), str(message["user"]), str(message["ask"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        if ask in self._waiting:
            return   # this replica's own question: it looked in its registry first
        outcome = self._outcome(request_id, user_id)
        if outcome is None:
            return
        answer = orjson.dumps({"ask": ask, "outcome": outcome}).decode()
        task = asyncio.ensure_future(self._db.notify(ANSWER, answer))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)
        task.add_done_callback(_logged)

    def _answered(self, payload: str) -> None:
        try:
            message = orjson.loads(payload)
            future = self._waiting.get(str(message["ask"]))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        if future is not None and not future.done():
            future.set_result(str(message["outcome"]))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _logged(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not answer an interrupt request: %s", task.exception())
