"""`LocalEngine`: the backend that runs the Responses API itself over the upstream's
`/v1/chat/completions` (engine mode).

`gateway/turns/` hands it a prepared turn whose body is a Responses request like the one
the forward backend sends (tools injected, `previous_response_id` set for a
conversation's next turn). It reads the history from its response store, translates
(`translate.py`), runs the loop (`loop.py`) and yields the emitter's events; the HTTP
layer frames and enriches them exactly as forward mode's rewritten events.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from typing import Any, AsyncContextManager, AsyncGenerator, AsyncIterator, Sequence

from gateway.config import InferenceConfig
from gateway.destinations import DestinationPolicy
from gateway.engine import translate
from gateway.engine.chat_round import CUT, UpstreamChatError, UpstreamStreamLost
from gateway.engine.chat_stream import ChatDecoder, Chunk
from gateway.engine.hooks import EngineHooks
from gateway.engine.emitter import Emitter
from gateway.engine.response import new_response
from gateway.engine.executor import EngineTool, Setup
from gateway.engine.guardrails import Moderation, guardrail_ids, with_guardrails
from gateway.engine.images import check_images, image_policy
from gateway.engine.loop import Loop, Model
from gateway.engine.plan import Plan
from gateway.engine.turn import EngineTurn
from gateway.schema.errors import not_found
from gateway.schema.ids import new_item_id
from gateway.schema.json_types import JsonObject
from gateway.storage.engine_responses import ResponseStore
from gateway.streaming.events import TERMINAL_EVENTS, Event
from gateway.upstream.client import UpstreamClient
from gateway.upstream.responses_api import StreamBroken, UpstreamStream

log = logging.getLogger("gateway.engine")
CHAT_PATH = "/v1/chat/completions"
# Looked up with an item's `type` as the client sent it (any JSON value).
_ITEM_PREFIXES: dict[Any, str] = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


class LocalEngine:
    def __init__(self, client: UpstreamClient, store: ResponseStore, inference: InferenceConfig,
                 tools: Sequence[EngineTool] = (), moderation: Moderation | None = None,
                 images: DestinationPolicy | None = None):
        self._client = client
        self._moderation = moderation  # where `guardrails` are checked
        self.store = store
        self._inference = inference
        self._tool_kinds = tuple(tools)  # the kinds of server-side tools, each its own executor
        self._images = images or image_policy([])  # where the upstream may fetch input_image URLs from
        self.hooks: EngineHooks | None = None  # observers of the loop (metrics), set by the wiring

    async def reach_upstream(self) -> None:
        """Raise LCORE's 503 when the upstream cannot be reached (any answer will do)."""
        await self._client.request("GET", "/v1/models")

    def check(self, body: JsonObject) -> None:
        """Refuse (422) what the engine cannot run, before the turn creates anything."""
        translate.check_request(body)
        for kind in self._tool_kinds:
            kind.check(body)
        if guardrail_ids(body.get("guardrails")) and self._moderation is None:
            raise translate.unsupported("guardrails need a moderation endpoint", param="guardrails")

    async def check_destinations(self, body: JsonObject) -> None:
        """Refuse (400) an `input_image` URL the upstream must not fetch (images.py),
        before the turn creates anything."""
        await check_images(body.get("input"), self._images)

    def _clients(self) -> list[Any]:
        """What holds connections of its own (configured endpoints), to start and close."""
        return [part for part in (self._moderation, *self._tool_kinds) if hasattr(part, "start")]

    async def start(self) -> None:
        for part in self._clients():
            await part.start()

    async def close(self) -> None:
        for part in self._clients():
            await part.close()

    # What the local-engine backend (gateway/turns/local.py) runs a turn with.

    def open(self, turn: EngineTurn) -> AsyncContextManager[AsyncIterator[list[Event]]]:
        """`async with engine.open(turn) as reads`: the events, a list per upstream read;
        leaving the block closes the loop (and the upstream stream) at once."""
        return aclosing(self.events(turn))

    async def respond(self, turn: EngineTurn) -> JsonObject:
        """The finished response object (non-streaming: what the stream ends with)."""
        terminal: Event | None = None
        async for events in self.events(turn):
            terminal = events[-1] if events else terminal
        assert terminal is not None
        response: dict[str, Any] = terminal.data["response"]
        return response

    async def events(self, turn: EngineTurn) -> AsyncGenerator[list[Event], None]:
        """The response's events, a list per upstream read, the terminal event last."""
        body, prepared = turn.body, turn.plan
        history = await self._history(prepared.identity.user_id, body.get("previous_response_id"))
        inputs = [_with_id(item) for item in translate.input_items(body.get("input"))]
        references = {item["id"]: item for item in history + inputs
                      if isinstance(item.get("id"), str) and item.get("type") != "item_reference"}
        tools = body.get("tools") or []
        choice, allowed = translate.tool_choice(body.get("tool_choice")) if tools else (None, None)
        chat: dict[str, Any] = {"model": prepared.model.id, "stream": True, "stream_options": {"include_usage": True},
                                **translate.chat_options(body, bool(tools))}
        functions = translate.chat_tools(tools)  # the client's own; the server-side tools offer theirs below
        if functions:
            chat["tools"] = functions
        plan = Plan(chat=chat, messages=translate.to_messages(history + inputs, body.get("instructions"), references),
                    tools={tool["name"]: tool for tool in tools if tool.get("type") == "function"},
                    tool_choice=choice, allowed=allowed,
                    max_infer_iters=int(body.get("max_infer_iters") or self._inference.max_infer_iters),
                    max_tool_calls=body.get("max_tool_calls"),
                    client_tool_status=self._inference.client_tool_status, start_at_once=prepared.background,
                    round_ended=turn.round_ended, admit_round=turn.admit_round,
                    round_lost=turn.round_lost)
        response = new_response(new_item_id("resp"), prepared.model.id, body, prepared.previous_response_id,
                                [self._echo(tool) for tool in tools], prepared.background)
        emitter = Emitter(response)
        setup = Setup(body, tools, history, inputs, plan, emitter)
        for kind in self._tool_kinds:  # may refuse (422): nothing has run yet
            kind.offer(setup)

        def snapshot() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
            stored = {**emitter.response, "output": list(emitter.output), "model": prepared.display_model,
                      "conversation": prepared.shown_conversation}
            return stored, inputs, history + inputs + emitter.output

        async def save(emitter: Emitter, finished: bool) -> None:
            """Queued at creation and after each round; awaited at the end, before the
            client can see the terminal event."""
            if prepared.store:
                done = self.store.save(response["id"], prepared.identity.user_id, snapshot, wait=finished)
                if done is not None:
                    await asyncio.shield(done)  # a client that leaves must not undo the commit

        model: Model = lambda request: self._chat(request, prepared.model.id)  # noqa: E731
        if self._moderation is not None:  # the input checked now, before anything is streamed
            model = await with_guardrails(model, self._moderation, guardrail_ids(body.get("guardrails")), inputs,
                                          plan)
        turn.body = {}  # translated: nothing needs it while the stream is open
        ended = False
        try:
            async for events in Loop(model, self._tool_kinds, self.hooks).run(plan, emitter, save):
                ended = bool(events) and events[-1].type in TERMINAL_EVENTS
                yield events
        except (asyncio.CancelledError, GeneratorExit) as exc:
            # Stopped before its end: cancelled inside this generator, or closed while
            # its consumer was elsewhere (writing to the client) when it was cancelled.
            stopped = turn.outcome.stopped_reason
            kept = stopped is not None and emitter.started
            if prepared.store and not ended and (kept or (prepared.background and isinstance(exc, asyncio.CancelledError))):
                if stopped is not None and kept:
                    # Its client stopped it and keeps what it got (the turn records it
                    # with this response's id): saved `incomplete`, so the conversation
                    # goes on from the partial answer.
                    emitter.stop(stopped)
                else:
                    # Cancelled (`POST /v1/responses/{id}/cancel`): the stored row says
                    # so, with the output so far, before the cancel is answered.
                    emitter.response.update(status="cancelled", usage=turn.usage)   # what it used so far
                done = self.store.save(response["id"], prepared.identity.user_id, snapshot, wait=True)
                assert done is not None   # wait=True: its commit
                try:
                    await asyncio.shield(done)
                except Exception:  # the store logged it
                    pass
            raise
        except Exception:
            if not emitter.started or ended:
                raise
            # A fault of ours after the first event: the stream still ends as the
            # protocol says (docs/architecture.md, decision 3: after the first byte
            # an error is a schema-valid `response.failed`); the cause goes to the log only.
            log.exception("the local engine failed during %s", response["id"])
            yield [*emitter.take(), emitter.fail("An unexpected error occurred while processing the request.")]

    def _echo(self, tool: dict[str, Any]) -> dict[str, Any]:
        """A request's tool as the response shows it."""
        shown = (kind.echo(tool) for kind in self._tool_kinds)
        return next((echo for echo in shown if echo is not None), dict(tool))

    async def _history(self, user_id: str, previous_id: str | None) -> list[dict[str, Any]]:
        if not previous_id:
            return []
        previous = await self.store.get(previous_id, user_id)
        if previous is None:
            raise not_found("Response", previous_id, code="response_not_found", param="previous_response_id")
        return previous.context

    async def complete(self, model: str, instructions: str, text: str) -> str:
        """One plain chat completion outside any turn (no tools, nothing stored): the
        assistant's text for `text` under the system prompt `instructions`."""
        request = {"model": model, "stream": False,
                   "messages": [{"role": "system", "content": instructions}, {"role": "user", "content": text}]}
        reply = (await self._client.request_ok("POST", CHAT_PATH, json=request, model=model)).json()
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise UpstreamChatError("the upstream's chat completion has no message") from None
        return content if isinstance(content, str) else ""

    async def _chat(self, request: dict[str, Any], model: str) -> AsyncGenerator[list[Chunk], None]:
        """The upstream's chat stream, decoded: the chunks of each read."""
        decoder = ChatDecoder()
        redact = self._client.redact
        async with UpstreamStream(self._client.open("POST", CHAT_PATH, json=request), model, redact) as reads:
            try:
                async for data in reads:
                    chunks = decoder.feed(data)
                    if chunks:
                        if decoder.malformed is not None:  # rare: what came before it, then the loss
                            before = _before_error(chunks)
                            if before:
                                yield before
                            raise UpstreamStreamLost(decoder.malformed, malformed=True)
                        if data.find(b'"error"') >= 0:  # rare: only then look for error chunks
                            _redact_errors(chunks, redact)
                        yield chunks
            except StreamBroken as exc:
                raise (UpstreamChatError if exc.deadline else UpstreamStreamLost)(str(exc)) from None
            tail = decoder.close()
            if tail:
                _redact_errors(tail, redact)
                yield tail
            if not decoder.done:
                raise UpstreamStreamLost(CUT)  # the loop checks for a finish_reason first


def _before_error(chunks: list[Chunk]) -> list[Chunk]:
    """The chunks before the first error chunk (a malformed event's)."""
    for index, chunk in enumerate(chunks):
        if chunk.__class__ is dict and chunk.get("error") is not None:
            return chunks[:index]
    return chunks


def _redact_errors(chunks: list[Chunk], redact: Any) -> None:
    """An error chunk's message without what the gateway sent the upstream (its key)."""
    for chunk in chunks:
        if chunk.__class__ is dict and chunk.get("error") is not None:
            error = chunk["error"]
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                error["message"] = redact(error["message"])
            elif isinstance(error, str):
                chunk["error"] = redact(error)


def _with_id(item: dict[str, Any]) -> dict[str, Any]:
    """An input item as stored: with an id (input_items and item_reference name it)."""
    if isinstance(item.get("id"), str):
        return item
    return {"id": new_item_id(_ITEM_PREFIXES.get(item.get("type"), "item")), **item}
