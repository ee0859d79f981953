"""The local-engine backend: turns run on the gateway's own Responses loop over the
upstream's Chat Completions (`LocalEngine`), conversations are the gateway's (its turns
chain by `previous_response_id`), and stored responses are the engine's own, each
scoped to the caller (another user's response is a 404, as a missing one).

`GET /v1/responses/{id}` works during a stream (the row is written at creation and
after each tool round: `in_progress` with the items so far). Lists are OpenAI's
cursor pages: `after`, `limit` (1-100, default 20), `order` (`desc` default).
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, AsyncIterator, Mapping

from gateway.config import InferenceConfig
from gateway.engine.backend import LocalEngine
from gateway.identity import Identity
from gateway.schema.errors import ApiError, invalid_attribute, not_found
from gateway.schema.json_types import JsonObject
from gateway.schema.responses_request import ResponsesRequest, parse_responses_request
from gateway.storage.conversations import ConversationRepository
from gateway.streaming.enrich import output_text
from gateway.streaming.events import Event
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.tools import ConfiguredTools
from gateway.turns.body import backend_body
from gateway.turns.owned import OwnedTurns
from gateway.turns.turn import Feed, Plan, Turn


class EngineBackend:
    def __init__(self, engine: LocalEngine, tools: ConfiguredTools, inference: InferenceConfig,
                 conversations: ConversationRepository, owned: OwnedTurns):
        self._engine = engine
        self._store = engine.store
        self._tools = tools
        self._inference = inference
        self._conversations = conversations
        self._owned = owned

    async def accept(self, raw: Any, refusal: ApiError) -> ResponsesRequest:
        """The engine resolves `item_reference` input items itself."""
        return parse_responses_request(raw, self._tools.server_urls, engine=True)

    async def check(self, raw: JsonObject, tools: list[JsonObject] | None) -> None:
        self._engine.check({**raw, "tools": tools})
        await self._engine.check_destinations(raw)

    async def reach_conversation(self, upstream_id: str | None) -> None:
        await self._engine.reach_upstream()   # the conversation is the gateway's; the model is upstream

    async def rename_conversation(self, upstream_id: str | None, topic_summary: str) -> None:
        await self._engine.reach_upstream()

    async def forget_conversation(self, upstream_id: str | None, response_ids: tuple[str, ...]) -> None:
        pass  # its stored responses are the gateway's rows, deleted with the conversation

    def body(self, raw: JsonObject, request: ResponsesRequest, plan: Plan,
             tools: list[JsonObject] | None) -> JsonObject:
        return backend_body(raw, request, plan, tools, self._inference)  # the engine reads it itself

    async def create_conversation(self) -> str | None:
        return None  # the gateway keeps the conversation

    async def append_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        raise AssertionError("the engine's conversations are the gateway's: nothing is appended upstream")

    async def respond(self, turn: Turn) -> dict[str, Any]:
        return await self._engine.respond(turn)

    def open(self, turn: Turn) -> AsyncContextManager[AsyncIterator[list[Event]]]:
        return self._engine.open(turn)

    def feed(self, rewriter: StreamRewriter) -> Feed:
        return rewriter.feed_events  # the engine's events, a list per upstream read

    async def summarize(self, model: str, instructions: str, text: str) -> str:
        return await self._engine.complete(model, instructions, text)

    async def owns(self, identity: Identity, response_id: str) -> bool:
        return await self._store.get(response_id, identity.user_id) is not None

    async def stored(self, identity: Identity, response_id: str) -> JsonObject | None:
        found = await self._store.get(response_id, identity.user_id)
        return None if found is None else _shown(found.response)

    async def delete(self, identity: Identity, response_id: str) -> JsonObject | None:
        found = await self._store.get(response_id, identity.user_id)
        if found is None:
            return None
        # The turn's record too, so its conversation continues from the turn before it.
        await self._owned.owned(identity, found.id)  # waits for a pending record
        await self._store.delete(found.id, found.user_id)
        await self._conversations.delete_turn(found.id)
        return {"id": found.id, "object": "response", "deleted": True}

    async def input_items(self, identity: Identity, response_id: str,
                          query: Mapping[str, str]) -> JsonObject | None:
        found = await self._store.get(response_id, identity.user_id)
        if found is None:
            return None
        after, limit, descending = _page(query)
        ordered = list(reversed(found.input)) if descending else found.input
        if after is not None:
            position = next((index for index, item in enumerate(ordered) if item.get("id") == after), None)
            if position is None:
                raise not_found("Item", after, code="item_not_found", param="after")
            ordered = ordered[position + 1:]
        return _listing(ordered[:limit], len(ordered) > limit)

    async def close(self) -> None:
        await self._engine.close()

    async def list(self, identity: Identity, query: Mapping[str, str]) -> JsonObject:
        after, limit, descending = _page(query)
        page = await self._store.list(identity.user_id, after=after, limit=limit, descending=descending)
        if page is None:
            raise not_found("Response", after, code="response_not_found", param="after")
        return _listing([_shown(response) for response in page[0]], page[1])


def _shown(response: JsonObject) -> JsonObject:
    return {**response, "output_text": output_text(response)}


def _page(query: Mapping[str, str]) -> tuple[str | None, int, bool]:
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        limit = 0
    if not 1 <= limit <= 100:
        raise invalid_attribute("limit must be an integer between 1 and 100", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid_attribute("order must be 'asc' or 'desc'", param="order")
    return query.get("after") or None, limit, order == "desc"


def _listing(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}
