"""One request's plan as the pipeline prepared it (`Turn`), and where it runs
(`Backend`): the unit every endpoint, transport and backend passes around."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, AsyncContextManager, AsyncIterator, Protocol

from gateway.identity import Identity
from gateway.quota.reservation import Reservation
from gateway.schema.ids import openai_conversation_id
from gateway.storage.conversations import ConversationRecord
from gateway.upstream.catalog import ModelInfo


@dataclass(slots=True)
class Turn:
    """One request's plan and, once the upstream finished, its result."""

    identity: Identity
    stream: bool
    previous_response_id: str | None     # as the client sent it (echoed in responses)
    generate_topic_summary: bool | None
    body: dict[str, Any]                 # what is sent upstream
    headers: dict[str, str]              # extra upstream headers (provider data)
    model: ModelInfo
    display_model: str                   # the response's `model`: as sent, or LCORE's short form
    conversation_id: str | None          # bare stored form; None: a `store: false` turn in none
    upstream_conversation_id: str | None  # `conv_…` when the upstream keeps the conversation
    existing: ConversationRecord | None  # None: this turn starts the conversation
    forked_from: str | None              # the response this turn forks from (a new conversation)
    store: bool = True                   # False: nothing is created or recorded for this turn
    engine: bool = False                 # run by the local engine (else forwarded upstream)
    background: bool = False             # run detached from the client (`background: true`)
    append_to_upstream: bool = False    # sent with previous_response_id; add it to the conversation after
    appended_input: Any = None           # the input to add then (kept only in that case)
    started: float = field(default_factory=time.time)  # formatted only when recorded
    result: dict[str, Any] | None = None  # the terminal response object
    quotas: dict[str, int] | None = None  # available_quotas once settled
    reservation: Reservation | None = None  # the tokens admission reserved (quota_handlers)
    abandoned: bool = False              # the client left before the upstream finished
    _settling: asyncio.Future | None = None

    @property
    def conversation(self) -> str | None:
        """The id returned to clients (`conv_<48 hex>`, spec 001)."""
        return openai_conversation_id(self.conversation_id) if self.conversation_id else None


class Backend(Protocol):
    """Where a prepared turn runs (DESIGN: one interface, two implementations): the
    upstream's Responses API (`UpstreamResponses`, forward mode) or the local engine
    over its Chat Completions (`LocalEngine`). Everything around it is shared."""

    async def respond(self, turn: Turn) -> dict[str, Any]:
        """The finished response object (a JSON request)."""

    def open(self, turn: Turn) -> AsyncContextManager[AsyncIterator[Any]]:
        """The turn's stream: `async with backend.open(turn) as reads`, then one item per
        upstream read: the upstream's raw SSE bytes (forward: the rewriter's fast path)
        or a list of events (the engine)."""
