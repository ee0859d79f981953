"""The streaming queries running in this process, by request id, with their owner:
what `POST /v1/streaming_query/interrupt` stops (LCORE keeps the same in-process
registry). A stream that finished is remembered for a while, so interrupting it is
LCORE's 200 `interrupted: false` rather than a 404."""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from gateway.schema.errors import USER, ApiError, not_found
from gateway.schema.error_list import request_validation_error, value_error_at

# How many finished streams are remembered (their id and owner: ~200 bytes each).
FINISHED_KEPT = 10_000
INTERRUPTED = "Streaming request interrupted"
ALREADY_DONE = "Streaming request already completed; nothing to interrupt"   # LCORE's words


@dataclass
class _Running:
    user_id: str
    task: asyncio.Task[Any]
    sink: Any = None          # told it was interrupted (`interrupted = True`) before its task is cancelled
    interrupted: bool = False


def check_request_id(value: object) -> str:
    """A request id as LCORE's interrupt takes it (a UUID), or its 422."""
    if isinstance(value, str):
        try:
            uuid.UUID(value)
            return value
        except ValueError:
            pass
    raise request_validation_error(value_error_at(["request_id"], f"Improper request ID {value}", value))


def interrupt_forbidden(user_id: str, request_id: str) -> ApiError:
    return ApiError(403, "User does not have permission to interrupt this streaming request",
                    f"User {USER} does not own streaming request with ID {request_id}",
                    code="stream_forbidden", param="request_id", user_id=user_id)


class StreamRegistry:
    def __init__(self) -> None:
        self._running: dict[str, _Running] = {}
        self._finished: OrderedDict[str, str] = OrderedDict()   # request id -> owner

    def add(self, request_id: str, user_id: str, task: asyncio.Task[Any], sink: Any = None) -> None:
        self._running[request_id] = _Running(user_id, task, sink)

    def finished(self, request_id: str) -> None:
        running = self._running.pop(request_id, None)
        if running is not None:
            self._finished[request_id] = running.user_id
            while len(self._finished) > FINISHED_KEPT:
                self._finished.popitem(last=False)

    def running(self) -> int:
        """How many streams run here now."""
        return len(self._running)

    def was_interrupted(self, request_id: str) -> bool:
        running = self._running.get(request_id)
        return running is not None and running.interrupted

    def owner(self, request_id: str) -> str | None:
        """Who runs or ran this stream here (None: not this process's)."""
        running = self._running.get(request_id)
        return running.user_id if running is not None else self._finished.get(request_id)

    def interrupt(self, request_id: str, user_id: str) -> bool:
        """Stop the caller's stream: True if it was running here and is now stopping,
        False if it had finished; 404 unknown here, 403 someone else's."""
        owner = self.owner(request_id)
        if owner is None:
            raise not_found("Streaming Request", request_id, code="stream_not_found", param="request_id")
        if owner != user_id:
            raise interrupt_forbidden(user_id, request_id)
        running = self._running.get(request_id)
        if running is None or running.task.done() or running.interrupted:
            return False
        running.interrupted = True
        if running.sink is not None:
            running.sink.interrupted = True
        running.task.cancel()
        return True
