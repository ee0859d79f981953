"""A turn a `question_validity` shield blocked (`turns/shields.py`): LCORE 0.6's
outcome, kept on purpose. The question never reaches the model: the turn is answered
with the shield's message as a completed response whose id is `modr-…`, with zero
usage (nothing charged), through the same runner, settlement and record as any turn.

`BlockedBackend` wraps the backend `prepare()` chose: running the turn gives the
synthetic response (JSON) or its four events (stream: created, the message item added
and done, completed); everything else (appending the turn to the upstream
conversation, topic summaries, stored responses) is the wrapped backend's. Whoever
answers or counts a blocked turn its own way (the query stream's three frames, the
metrics) reads `Plan.blocked`, the shield's message, never the backend's class.
"""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from gateway.streaming.events import Event
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.turn import Backend, Feed, Plan, Turn


# The id prefix of a blocked turn's response (LCORE's moderation ids): no backend has it.
BLOCKED_PREFIX = "modr-"


def blocked_response(plan: Plan, message: str, response_id: str) -> dict[str, Any]:
    """The completed response a blocked turn answers with."""
    item = {"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": message, "annotations": []}]}
    return {"id": response_id, "object": "response", "created_at": int(plan.started), "status": "completed",
            "model": plan.model.id, "output": [item], "error": None, "incomplete_details": None,
            "instructions": None, "metadata": {}, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "temperature": None, "top_p": None, "previous_response_id": plan.previous_response_id,
            "store": plan.store, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def blocked_events(response: dict[str, Any]) -> list[Event]:
    """LCORE's synthetic stream of a blocked turn."""
    item = response["output"][0]
    created = {**response, "status": "in_progress", "output": [], "created_at": response["created_at"]}
    return [Event.build({"type": "response.created", "sequence_number": 0, "response": created}),
            Event.build({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                         "item": item}),
            Event.build({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0,
                         "item": item}),
            Event.build({"type": "response.completed", "sequence_number": 3, "response": response})]


class BlockedBackend:
    def __init__(self, backend: Backend, message: str):
        self._backend = backend
        self.message = message
        self._id = f"{BLOCKED_PREFIX}{uuid.uuid4()}"

    def __getattr__(self, name: str) -> Any:
        # Whatever is not running the turn is the wrapped backend's (appending the turn
        # to the upstream conversation, topic summaries, stored responses).
        return getattr(self._backend, name)

    async def respond(self, turn: Turn) -> dict[str, Any]:
        return blocked_response(turn.plan, self.message, self._id)

    def open(self, turn: Turn) -> Any:
        return self._events(turn)

    @asynccontextmanager
    async def _events(self, turn: Turn) -> AsyncIterator[AsyncIterator[list[Event]]]:
        async def reads() -> AsyncIterator[list[Event]]:
            yield blocked_events(blocked_response(turn.plan, self.message, self._id))

        yield reads()

    def feed(self, rewriter: StreamRewriter) -> Feed:
        return rewriter.feed_events

