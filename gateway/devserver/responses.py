"""POST /v1/responses of the Llama Stack 0.7.3 stand-in (JSON and SSE).

Order of checks, as observed on Llama Stack: body validation (400) -> previous_response_id
together with conversation (400) -> conversation id format (400) -> unknown
conversation (404) -> unknown previous response (404). The model is checked only when
the turn runs: before any byte for JSON (404), after `in_progress` for a stream (the
untyped error event). See the package docstring for the triggers and knobs.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from . import sse, triggers
from .engine import Turn, approvals_from, run_turn
from .items import (CONVERSATION, PLAIN, PREVIOUS, conversation_copies, to_messages,
                    turn_input_items)
from .model import last_user_text
from .shapes import (Echo, detail, json_response, model_not_found_message, queued_object,
                     response_object, usage, validation_error)
from .state import STATE, ServerState
from .store import CONVERSATION_ID_RE, Conversation, StoredResponse
from .stream import EventWriter, untyped_error_frame
from .tools import build_toolset
from .validation import check_create, json_invalid, not_an_object

# Model ids the stand-in serves: "chat" runs the scripted model; "ghost" is registered in
# Llama Stack but unknown to its backend (the backend's 404 surfaces as a 500).
MODELS = {"scripted/scripted-chat": "chat", "scripted-chat": "chat", "scripted-mini": "chat",
          "scripted/scripted-mini": "chat",
          "scripted/ghost-model": "ghost"}
GHOST_MESSAGE = "The model `ghost-model` does not exist."


def _error(message: str) -> dict[str, str]:
    return {"code": "server_error", "message": message}


class CreateRequest:
    """One parsed and resolved POST /v1/responses."""

    __slots__ = ("body", "history", "turn_input", "conversation", "messages", "echo",
                 "toolset", "knobs", "trigger", "id", "created_at", "store")

    def __init__(self, state: ServerState, body: dict[str, Any]) -> None:
        self.body = body
        self.id = "resp_" + str(uuid.uuid4())
        self.created_at = int(time.time())
        self.store = body.get("store", True) is not False
        self.toolset = build_toolset(body.get("tools"))
        if self.toolset.mcp_definitions:
            state.mcp_definitions.extend(self.toolset.mcp_definitions)
        self.knobs = triggers.read_knobs(body.get("metadata"), state.delay_ms, state.dialect)
        self.echo = Echo(body, list(body.get("tools") or []) if self.knobs.echo_tools_verbatim else self.toolset.echo)
        self.history: list[dict[str, Any]] = []
        self.conversation: Conversation | None = None
        self.messages: list[dict[str, Any]] = []
        self.turn_input: list[dict[str, Any]] = []
        self.trigger: str | None = None

    def prepare(self, mode: str) -> None:
        self.turn_input = turn_input_items(self.body["input"], mode)
        current = to_messages(self.turn_input)
        # Triggers read this turn's own text, so a replayed earlier turn cannot re-fire.
        self.trigger = triggers.find_trigger(last_user_text(current))
        messages = to_messages(self.history) + current if self.history else current
        instructions = self.body.get("instructions")
        if self.trigger is None and isinstance(instructions, str):
            self.trigger = triggers.find_trigger(instructions)
        if instructions:
            messages.insert(0, {"role": "system", "content": instructions})
        self.messages = messages

    def response(self, status: str, output: list[dict[str, Any]], usage_: Any = None,
                 error: Any = None) -> dict[str, Any]:
        done = int(time.time()) if status == "completed" else None
        return response_object(self.echo, self.id, self.created_at, status=status,
                               output=output, usage_=usage_, completed_at=done, error=error)

    def finished(self, turn: Turn) -> dict[str, Any]:
        """The response a turn that ran ends with: completed, or `incomplete` when a stop
        trigger says the model stopped for length or a content filter (after its text)."""
        reason = triggers.INCOMPLETE_REASONS.get(self.trigger or "")
        response = self.response("incomplete" if reason else "completed", turn.output,
                                 usage(turn.input_tokens, turn.output_tokens))
        if reason:
            response["incomplete_details"] = {"reason": reason}
        return response

    def run(self) -> Turn:
        approvals = approvals_from(self.history, self.turn_input)
        return run_turn(self.messages, self.toolset, approvals=approvals,
                        tool_choice=self.body.get("tool_choice"), deltas=self.knobs.deltas,
                        parallel=self.trigger == triggers.PARALLEL_CALLS)

    def persist(self, state: ServerState, response: dict[str, Any],
                turn: Turn | None = None) -> None:
        if self.store:
            state.responses.put(StoredResponse(response, self.history + self.turn_input))
        if turn is not None and self.conversation is not None:
            # One add-items call of the input and the output (its timing: `Conversation.append`).
            timed = state.llama_stack_items
            self.conversation.append(conversation_copies(self.turn_input, keep_strings=timed) + turn.output, timed)
            if timed:
                self.conversation.last_turn = self.history + self.turn_input + turn.output


def _unreachable_mcp(req: CreateRequest) -> str | None:
    for server in req.toolset.mcp_servers:
        if server.server_url and "unreachable" in server.server_url:
            return server.server_url
    return None


async def create_response(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return validation_error(json_invalid(exc.pos))
    if not isinstance(body, dict):
        return validation_error(not_an_object())
    errors = check_create(body)
    if errors:
        return validation_error(errors)
    req = CreateRequest(state, body)
    failure = _resolve(state, req)
    if failure is not None:
        message, status = failure
        if status == 404 and body.get("stream") is True:
            # Llama Stack refuses an unknown conversation or previous response inside a
            # 200 stream, as an untyped error event with the status as its code.
            return web.Response(body=untyped_error_frame(message, "404"), content_type="text/event-stream",
                                charset="utf-8")
        return detail(message, status)
    if req.trigger in triggers.STATUS_ANSWERS:
        status, headers = triggers.STATUS_ANSWERS[req.trigger]
        return web.json_response({"detail": f"scripted {status}"}, status=status, headers=headers)
    if body.get("stream") is True:
        return await _stream(request, state, req)
    return await _json(request, state, req)


def _resolve(state: ServerState, req: CreateRequest) -> tuple[str, int] | None:
    """Load the history a turn continues from; (message, status) if it cannot."""
    body = req.body
    prev_id = body.get("previous_response_id")
    conv_id = body.get("conversation")
    if isinstance(conv_id, dict):
        conv_id = conv_id.get("id")
    if prev_id and conv_id:
        return ("Invalid value for 'previous_response_id, conversation': "
                "previous_response_id and conversation are both provided. Provide only "
                "one of these parameters.", 400)
    mode = PLAIN
    if conv_id:
        if not isinstance(conv_id, str) or not CONVERSATION_ID_RE.fullmatch(conv_id):
            return (f"Invalid value for 'conversation': {conv_id}. Must match format "
                    "'conv_' followed by 48 lowercase hex characters.", 400)
        conv = state.conversations.get(conv_id) if state.conversations_enabled else None
        if conv is None:
            return f"Conversation '{conv_id}' not found.", 404
        req.conversation = conv
        # Llama Stack 0.7.3 reads the items (oldest first) on a conversation's first turn
        # only; later turns read the last turn's messages, not the items added since.
        req.history = conv.last_turn if state.llama_stack_items and conv.last_turn is not None else conv.ordered()
        mode = CONVERSATION
    elif prev_id:
        prev = state.responses.get(prev_id)
        if prev is None:
            return (f"Response '{prev_id}' not found. Use 'client.responses.list()' to "
                    "list available Responses.", 404)
        req.history = prev.input + prev.response["output"]
        mode = PREVIOUS
    req.prepare(mode)
    return None


async def _json(request: web.Request, state: ServerState,
                req: CreateRequest) -> web.StreamResponse:
    if req.knobs.delay_s:
        await asyncio.sleep(req.knobs.delay_s)
    model = req.echo.model
    kind = MODELS.get(model)
    if kind is None:
        req.persist(state, req.response("in_progress", []))  # Llama Stack's stored ghost
        return detail(model_not_found_message(model), 404)
    trigger = req.trigger
    if trigger == triggers.HANG_UPSTREAM:
        await sse.wait_for_disconnect(request)
        return web.Response(status=504)
    if trigger in (triggers.ECHO_ERROR, triggers.ECHO_ERROR_FIRST):
        return detail(triggers.echo_of(request.headers, req.body), 400)
    if kind == "ghost" or trigger in (triggers.FAIL_UPSTREAM, triggers.CONTEXT_OVERFLOW):
        if kind == "ghost":
            message, status = GHOST_MESSAGE, 500
        elif trigger == triggers.FAIL_UPSTREAM:
            message, status = triggers.UPSTREAM_FAILURE_MESSAGE, 500
        else:
            message, status = triggers.CONTEXT_OVERFLOW_MESSAGE, 400
        req.persist(state, req.response("failed", [], error=_error(message)))
        return detail(message, status)
    url = _unreachable_mcp(req)
    if url:
        req.persist(state, req.response("in_progress", []))
        return json_response({"error": {"message": f"Failed to connect to MCP server at "
                                                   f"{url}: Connection refused"}}, 502)
    turn = req.run()
    if turn.hangs:  # an MCP server gone mid-call: Llama Stack never answers
        await sse.wait_for_disconnect(request)
        return web.Response(status=504)
    response = req.finished(turn)
    req.persist(state, response, turn)
    if req.echo.background:
        return json_response(queued_object(req.echo, req.id, req.created_at))
    return json_response(response)


async def _stream(request: web.Request, state: ServerState,
                  req: CreateRequest) -> web.StreamResponse:
    trigger = req.trigger
    model_kind = MODELS.get(req.echo.model)
    if trigger == triggers.HANG_UPSTREAM and model_kind is not None:
        await sse.wait_for_disconnect(request)  # not even the status line
        return web.Response(status=504)
    if trigger == triggers.ECHO_ERROR_FIRST:
        return web.Response(body=untyped_error_frame(triggers.echo_of(request.headers, req.body), "400"),
                            content_type="text/event-stream", charset="utf-8")
    delay = req.knobs.delay_s
    writer = EventWriter(req.id, req.knobs.dialect)
    initial = req.response("in_progress", [])
    initial_json = orjson.dumps(initial)
    writer.response_event(initial_json, "response.created")
    writer.response_event(initial_json, "response.in_progress")
    req.persist(state, initial)  # like Llama Stack: stored while it runs
    resp = await sse.start(request)
    frames = writer.frames

    if model_kind is None:
        frames.append(untyped_error_frame(model_not_found_message(req.echo.model), "404"))
        await sse.write_frames(resp, frames, delay)
        await sse.finish(resp)
        return resp
    if trigger == triggers.ERROR_EVENT:
        frames.append(untyped_error_frame(triggers.ERROR_EVENT_MESSAGE, "500"))
        await sse.write_frames(resp, frames, delay)
        await sse.finish(resp)
        return resp
    if trigger == triggers.STALL_STREAM:
        await sse.write_frames(resp, frames, delay)
        await sse.wait_for_disconnect(request)
        return resp

    message = None
    if model_kind == "ghost":
        message = GHOST_MESSAGE
    elif trigger == triggers.FAIL_UPSTREAM:
        message = triggers.UPSTREAM_FAILURE_MESSAGE
    elif trigger == triggers.CONTEXT_OVERFLOW:
        message = triggers.CONTEXT_OVERFLOW_MESSAGE
    elif trigger == triggers.ECHO_ERROR:
        message = triggers.echo_of(request.headers, req.body)
    elif (url := _unreachable_mcp(req)) is not None:
        message = f"Failed to connect to MCP server at {url}: Connection refused"
    if message is not None:
        final = req.response("failed", [], error=_error(message))
        writer.response_event(orjson.dumps(final), "response.failed")
        return await _finish(request, resp, frames, delay, lambda: req.persist(state, final))

    turn = req.run()
    if trigger in (triggers.BREAK_STREAM, triggers.RESET_STREAM):
        # A few deltas of the first message, then the body ends (or the connection drops):
        # no terminal event.
        for index, step in enumerate(turn.steps):
            if step.kind == "message":
                writer.message(index, step, limit=triggers.BREAK_AFTER_DELTAS)
                break
        await sse.write_frames(resp, frames, delay)
        if trigger == triggers.RESET_STREAM:
            triggers.reset(request)
        else:
            await sse.finish(resp)
        return resp
    writer.steps(turn.steps)
    if turn.hangs:  # events up to the call's in_progress, then nothing
        await sse.write_frames(resp, frames, delay)
        await sse.wait_for_disconnect(request)
        return resp
    final = req.finished(turn)
    writer.response_event(orjson.dumps(final), f"response.{final['status']}")
    if trigger in triggers.MALFORMED:
        opening = next((i for i, f in enumerate(frames) if f.find(b"response.output_text.delta") >= 0), 2)
        frames = triggers.malform(trigger, frames, opening)
    return await _finish(request, resp, frames, delay, lambda: req.persist(state, final, turn))


async def _finish(request: web.Request, resp: web.StreamResponse, frames: list[bytes],
                  delay: float, persist: Any) -> web.StreamResponse:
    """Store the final state before the terminal event, so a client that reads the
    terminal event and then GETs the response always finds it."""
    if not delay:
        persist()
        await sse.write_frames(resp, frames, 0)
    else:
        if await sse.write_frames(resp, frames[:-1], delay):
            persist()
            await sse.write_frames(resp, frames[-1:], delay, pause_first=True)
    await sse.finish(resp)
    return resp
