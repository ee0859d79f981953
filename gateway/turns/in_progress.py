"""How many turns each user has running in this process (`InProgress`): a user past the
operator's limit (`service.max_responses_in_progress_per_user`) is refused with 429
before anything is reserved or created, so one caller cannot hold every connection,
task and reservation of a replica. Background runs are turns running here too."""

from __future__ import annotations

from typing import Callable

from gateway.schema.errors import ApiError, too_many_in_progress


class InProgress:
    def __init__(self, limit: int, refusal: Callable[[str, int, int], ApiError] = too_many_in_progress):
        """`refusal(user_id, running, limit)`: the error past the limit (the WebSocket
        transport counts open sockets with its own)."""
        self._limit = limit
        self._refusal = refusal
        self._by_user: dict[str, int] = {}

    def enter(self, user_id: str) -> None:
        """Count a turn of this user's in, or refuse it (429)."""
        running = self._by_user.get(user_id, 0)
        if running >= self._limit:
            raise self._refusal(user_id, running, self._limit)
        self._by_user[user_id] = running + 1

    def leave(self, user_id: str) -> None:
        running = self._by_user.get(user_id, 0) - 1
        if running > 0:
            self._by_user[user_id] = running
        else:
            self._by_user.pop(user_id, None)

    def running(self, user_id: str) -> int:
        return self._by_user.get(user_id, 0)
