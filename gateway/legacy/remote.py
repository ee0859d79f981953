"""Interrupting a streaming query that runs on another replica sharing the same
PostgreSQL: LISTEN/NOTIFY, no table (nothing is written per stream).

The replica that gets `POST /v1/streaming_query/interrupt` for a stream it does not
run asks every replica on `gateway_stream_interrupt` (`{"id", "user", "ask"}`); the
one that runs (or recently ran) it answers on `gateway_stream_interrupted`
(`{"ask", "outcome"}`: `interrupted`, `finished` or `forbidden`) after it has
cancelled the stream's task, and the 200 is sent then. No answer within
`ANSWER_TIMEOUT`: no replica knows the stream, LCORE's 404.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Awaitable, Callable

import orjson

from gateway.legacy.interrupts import StreamRegistry

log = logging.getLogger("gateway.legacy")

ASK = "gateway_stream_interrupt"
ANSWER = "gateway_stream_interrupted"
ANSWER_TIMEOUT = 1.0   # seconds: NOTIFY reaches listeners in milliseconds


class RemoteInterrupts:
    def __init__(self, db: Any, registry: StreamRegistry):
        self._db = db
        self._registry = registry
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._stops: list[Callable[[], Awaitable[None]]] = []
        # Answers being sent, held until sent: the event loop keeps only weak references.
        self._answering: set[asyncio.Task[Any]] = set()

    @property
    def enabled(self) -> bool:
        return bool(self._stops)

    async def start(self) -> None:
        """Listen, where the database can (PostgreSQL); else interrupts stay in-process."""
        if not hasattr(self._db, "listen"):
            return
        self._stops.append(await self._db.listen(ASK, self._asked))
        self._stops.append(await self._db.listen(ANSWER, self._answered))

    async def close(self) -> None:
        while self._stops:
            await self._stops.pop()()

    async def ask(self, request_id: str, user_id: str) -> str | None:
        """The outcome from the replica that has the stream, or None if none has it."""
        ask = uuid.uuid4().hex
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

    def _asked(self, payload: str) -> None:
        try:
            message = orjson.loads(payload)
            request_id, user_id, ask = str(message["id"]), str(message["user"]), str(message["ask"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        if ask in self._waiting:
            return   # this replica's own question: it looked in its registry first
        owner = self._registry.owner(request_id)
        if owner is None:
            return
        if owner != user_id:
            outcome = "forbidden"
        else:
            outcome = "interrupted" if self._registry.interrupt(request_id, user_id) else "finished"
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


def _logged(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not answer an interrupt request: %s", task.exception())
