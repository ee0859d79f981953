"""The forward backend: turns go to the upstream's `/v1/responses` as they are
(`UpstreamResponses`), conversations are the upstream's, and stored responses are read
back from the upstream once the gateway's record says the caller owns them (404 for
any other, so ids cannot be probed)."""

from __future__ import annotations

from typing import Any, Mapping

from gateway.config import InferenceConfig
from gateway.identity import Identity
from gateway.schema.errors import ApiError
from gateway.schema.ids import shown_conversation_id
from gateway.schema.json_types import JsonObject
from gateway.schema.responses_request import ResponsesRequest
from gateway.storage.conversations import ConversationRepository, TurnRecord
from gateway.turns.content import form_name
from gateway.streaming.enrich import Enricher, output_text
from gateway.streaming.repair import repair_input_items, repair_response
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.tools import ConfiguredTools
from gateway.turns.body import backend_body
from gateway.turns.owned import OwnedTurns
from gateway.turns.turn import Feed, Plan, Turn
from gateway.upstream.llama_stack_input import for_llama_stack
from gateway.upstream.responses_api import UpstreamResponses, UpstreamStream


class ForwardBackend:
    def __init__(self, upstream: UpstreamResponses, tools: ConfiguredTools, inference: InferenceConfig,
                 conversations: ConversationRepository, owned: OwnedTurns):
        self._upstream = upstream
        self._tools = tools
        self._inference = inference
        self._conversations = conversations
        self._turns = owned   # which recorded turns the caller owns

    async def accept(self, raw: Any, refusal: ApiError) -> ResponsesRequest:
        raise refusal  # LCORE's request model is the upstream's

    async def check(self, raw: JsonObject, tools: list[JsonObject] | None) -> None:
        await self._tools.check_client_servers(tools)  # the upstream will connect: judge the names now

    def body(self, raw: JsonObject, request: ResponsesRequest, plan: Plan,
             tools: list[JsonObject] | None) -> JsonObject:
        body = backend_body(raw, request, plan, tools, self._inference)
        if plan.background:
            body["stream"] = True  # the gateway runs it, and records its events
        if not self._upstream.capabilities.is_llama_stack:
            body.pop("max_infer_iters", None)  # a Llama Stack extension other servers refuse
        elif isinstance(body.get("input"), list):
            body["input"] = for_llama_stack(body["input"])
        return body

    async def create_conversation(self) -> str | None:
        return await self._upstream.create_conversation()

    async def append_items(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        await self._upstream.append_items(conversation_id, items)

    async def reach_conversation(self, upstream_id: str | None) -> None:
        await self._upstream.reach_conversation(upstream_id)

    async def rename_conversation(self, upstream_id: str | None, topic_summary: str) -> None:
        await self._upstream.rename_conversation(upstream_id, topic_summary)

    async def forget_conversation(self, upstream_id: str | None, response_ids: tuple[str, ...]) -> None:
        await self._upstream.delete_conversation(upstream_id, response_ids)

    async def respond(self, turn: Turn) -> dict[str, Any]:
        plan = turn.plan
        return await self._upstream.create(turn.body, plan.headers, plan.model.id)

    def open(self, turn: Turn) -> UpstreamStream:
        plan = turn.plan
        stream = self._upstream.stream(turn.body, plan.headers, plan.model.id)
        turn.body = {}  # held by the request until it is sent; nothing else needs it while the stream is open
        return stream

    def feed(self, rewriter: StreamRewriter) -> Feed:
        return rewriter.feed  # the upstream's bytes: the rewriter's fast path

    async def summarize(self, model: str, instructions: str, text: str) -> str:
        # LCORE's call: the upstream's Responses API, not stored, no tools.
        response = await self._upstream.create({"model": model, "input": text, "instructions": instructions,
                                                "stream": False, "store": False}, {}, model)
        return output_text(response)

    async def _owned(self, identity: Identity, response_id: str) -> TurnRecord | None:
        return await self._turns.owned(identity, response_id)

    async def owns(self, identity: Identity, response_id: str) -> bool:
        return await self._owned(identity, response_id) is not None

    async def stored(self, identity: Identity, response_id: str) -> JsonObject | None:
        turn = await self._owned(identity, response_id)
        if turn is None:
            return None
        response = repair_response(await self._upstream.retrieve(turn.response_id))
        # As the turn showed it (issue 23).
        form = form_name(turn.conversation_form) or "string"
        conversation = shown_conversation_id(turn.conversation_id, form)
        Enricher(conversation, turn.previous_response_id,
                 configured_labels=self._tools.labels, redactor=self._tools.redactor).annotate(response)
        return response

    async def delete(self, identity: Identity, response_id: str) -> bytes | None:
        turn = await self._owned(identity, response_id)
        if turn is None:
            return None
        deleted = await self._upstream.delete(turn.response_id)
        await self._conversations.delete_turn(turn.response_id)
        return deleted

    async def input_items(self, identity: Identity, response_id: str, query: Mapping[str, str]) -> bytes | None:
        turn = await self._owned(identity, response_id)
        if turn is None:
            return None
        return repair_input_items(await self._upstream.input_items(turn.response_id, query))

    async def close(self) -> None:
        pass  # the upstream client is the wiring's to close

    async def list(self, identity: Identity, query: Mapping[str, str]) -> JsonObject:
        # The upstream's list is every user's: the gateway would have to filter it.
        raise ApiError(501, "Not implemented", "Listing responses is available in engine mode only "
                       "(llama_stack.api: chat_completions).", code="not_implemented")
