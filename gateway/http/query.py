"""LCORE's legacy query API: `POST /v1/query`, `POST /v1/streaming_query` and
`POST /v1/streaming_query/interrupt`. Each is an adapter of the one turn runner: the
request is translated into a Responses request (`legacy/request.py`), prepared and run
like any turn, and its answer translated back (`legacy/response.py`, and for streams
`legacy/framing.py`, the framing of this sink's rewriter)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from functools import partial
from typing import Any, AsyncIterator

from aiohttp import web

from gateway.config.access import Action
from gateway.http.client_writes import ClientWrites, client_writes
from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES
from gateway.legacy.blocked import blocked_stream
from gateway.legacy.framing import LegacyFraming
from gateway.legacy.interrupts import (ALREADY_DONE, INTERRUPTED, StreamRegistry, check_request_id,
                                       interrupt_forbidden)
from gateway.legacy.remote import RemoteInterrupts
from gateway.legacy.request import (QueryRequest, overrides_model, parse_query_request, query_input, recorded_parts,
                                    responses_request)
from gateway.legacy.response import query_response
from gateway.legacy.stream import INTERRUPTED_REASON, LegacyStream, failure, interrupted_response
from gateway.schema.errors import ApiError, conversation_forbidden, model_override_forbidden
from gateway.schema.error_list import request_validation_error
from gateway.schema.json_types import JsonObject
from gateway.streaming.rewriter import StreamRewriter
from gateway.turns.run import BodySink, FrameSink, client_left
from gateway.turns.service import TurnService
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.http")

STREAMS: web.AppKey[StreamRegistry] = web.AppKey("legacy_streams", StreamRegistry)
REMOTE: web.AppKey[RemoteInterrupts] = web.AppKey("legacy_remote_interrupts", RemoteInterrupts)
_FINISHED = ("completed", "requires_action")


async def _prepare(request: web.Request, stream: bool) -> tuple[QueryRequest, Turn]:
    """LCORE's request, its RBAC, then the turn prepared from its Responses form (every
    refusal before anything is created)."""
    services = request.app[SERVICES]
    query = parse_query_request(await read_json(request), services.turns.limits)
    caller = identity(request)
    if overrides_model(query) and Action.MODEL_OVERRIDE not in caller.actions:
        raise model_override_forbidden()
    raw = responses_request(query, stream, {server.name: server.url for server in services.config.mcp_servers})
    # A stored query's transcript keeps its question and attachments apart.
    recorded = partial(recorded_parts, request=query) if query.attachments else None
    try:
        turn = await services.turns.prepare(caller, raw, request.headers, prompt_field="system_prompt",
                                            recorded=recorded)
    except ApiError as exc:
        if exc.code == "conversation_forbidden" and query.conversation_id:
            # LCORE names the conversation as the request did, not in its `conv_` form.
            raise conversation_forbidden(caller.user_id, query.conversation_id) from None
        raise
    return query, turn


class _QueryBody(BodySink):
    def __init__(self) -> None:
        self.response: dict[str, Any] = {}

    def keep(self, response: JsonObject) -> bool:
        # A turn stopped for length or a content filter is this endpoint's 413 / 500:
        # charged what the upstream reported, not recorded.
        return response.get("status") in _FINISHED

    async def body(self, response: JsonObject) -> None:
        self.response = response


async def query(request: web.Request) -> web.Response:
    query, turn = await _prepare(request, stream=False)
    sink = _QueryBody()
    await request.app[SERVICES].turns.run(turn, sink)
    error = failure(str(sink.response.get("status")), sink.response, turn.plan.model.id)
    if error is not None:
        raise error
    return json_response(query_response(turn.plan.conversation_id, sink.response))


_CONTENT_TYPES = {False: "text/event-stream; charset=utf-8", True: "text/plain; charset=utf-8"}


class _Stream(web.StreamResponse):
    # Headers go out with the `start` frame, not in a write of their own (as http/sse.py).
    _send_headers_immediately = False


class _LegacySocket(FrameSink):
    def __init__(self, turns: TurnService, turn: Turn, request: web.Request, legacy: LegacyStream,
                 query: QueryRequest):
        super().__init__(StreamRewriter(turns.runner.enricher(turn), LegacyFraming(legacy)))
        self._turns = turns
        self.legacy = legacy
        self._turn = turn
        self._query = query
        self._request = request
        self.response = _Stream(headers={
            "Content-Type": _CONTENT_TYPES[legacy.text], "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
            "X-Request-ID": request["request_id"]})
        self.write = self.response.write
        self._writes: ClientWrites | None = None

    @property
    def interrupted(self) -> bool:
        return self._turn.outcome.stopped_reason is not None

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        """Set by the stream registry before it cancels the stream: the turn keeps its
        partial answer (`Settler.stopping`: the local engine saves it; see `stopped()`)."""
        self._turns.stopping(self._turn, INTERRUPTED_REASON if value else None)

    async def start(self) -> None:
        if not self.response.prepared:
            writer = await self.response.prepare(self._request)
            # A client that stops reading is cut past a bound (http/client_writes.py).
            self._writes = client_writes(self._request, writer, self._request.app[SERVICES].config.service)
            self.write = self._writes.write
            start = self.legacy.start()
            if start:
                await self.write(start)

    async def stopped(self, turn: Turn, exc: BaseException) -> None:
        """An interrupted turn ends as the settler ends one (`Settler.interrupted`: its
        partial answer recorded, charged as abandoned); this sink only says what its
        partial answer is, in LCORE's form, and what the question was."""
        if not (self.interrupted and isinstance(exc, asyncio.CancelledError)) or turn.outcome.result is not None:
            return
        failed = self.rewriter.repairer.fail(INTERRUPTED_REASON)
        partial = interrupted_response(failed[0].data["response"], self.legacy.partial_text()) if failed else None
        self._turns.interrupted(turn, partial, query_input(self._query))

    async def end(self, frames: bytes) -> None:
        if self._writes is None:
            await self.response.write_eof(frames)
        else:
            await self._writes.eof(frames, self.response.write_eof)


async def streaming_query(request: web.Request) -> web.StreamResponse:
    query, turn = await _prepare(request, stream=True)
    turns = request.app[SERVICES].turns
    request_id = str(uuid.uuid4())
    plan = turn.plan
    legacy = LegacyStream(plan.conversation_id, request_id, plan.model.id, text=query.media_type == "text/plain")
    if plan.blocked is not None:
        return await _blocked(request, turn, legacy, plan.blocked)
    sink = _LegacySocket(turns, turn, request, legacy, query)
    streams = request.app[STREAMS]
    running = asyncio.ensure_future(turns.run(turn, sink))
    streams.add(request_id, plan.identity.user_id, running, sink)
    try:
        await running
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not streams.was_interrupted(request_id) or (current is not None and current.cancelling()):
            raise
        # Interrupted by its user: recorded with its partial answer, charged as abandoned.
        await sink.start()
        await sink.end(legacy.interrupted())
    except Exception as exc:
        if not client_left(exc):
            raise
        log.info("client went away during the streaming query of %s", plan.conversation_id)
    finally:
        streams.finished(request_id)
    return sink.response


async def _blocked(request: web.Request, turn: Turn, legacy: LegacyStream, message: str) -> web.StreamResponse:
    """A question a shield blocked: the turn settled and recorded as a JSON turn, then
    LCORE's three frames (`legacy/blocked.py`)."""
    sink = _QueryBody()
    await request.app[SERVICES].turns.run(turn, sink)
    response = _Stream(headers={"Content-Type": _CONTENT_TYPES[legacy.text], "Cache-Control": "no-cache",
                                "X-Request-ID": request["request_id"]})
    await response.prepare(request)
    await response.write_eof(blocked_stream(legacy, message, sink.response.get("available_quotas") or {}))
    return response


async def interrupt(request: web.Request) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, dict) or "request_id" not in body:
        raise request_validation_error([{"type": "missing", "loc": ["body", "request_id"], "msg": "Field required",
                                         "input": body}])
    extra = [key for key in body if key != "request_id"]
    if extra:
        raise request_validation_error([{"type": "extra_forbidden", "loc": ["body", key],
                                         "msg": "Extra inputs are not permitted", "input": body[key]}
                                        for key in extra])
    request_id = check_request_id(body["request_id"])
    registry, user_id = request.app[STREAMS], identity(request).user_id
    remote = request.app.get(REMOTE)
    outcome = None
    if registry.owner(request_id) is None and remote is not None and remote.enabled:
        outcome = await remote.ask(request_id, user_id)   # another replica's stream
    if outcome == "forbidden":
        raise interrupt_forbidden(user_id, request_id)
    stopped = outcome == "interrupted" if outcome is not None else registry.interrupt(request_id, user_id)
    return json_response({"request_id": request_id, "interrupted": stopped,
                          "message": INTERRUPTED if stopped else ALREADY_DONE})


async def interrupts_across_replicas(app: web.Application) -> AsyncIterator[None]:
    """A cleanup context, after the services': on PostgreSQL, interrupts reach the
    replica that runs the stream (`legacy/remote.py`)."""
    remote = RemoteInterrupts(app[SERVICES].db, app[STREAMS])
    await remote.start()
    app[REMOTE] = remote
    yield
    await remote.close()


def add_routes(app: web.Application, prefix: str) -> None:
    if STREAMS not in app:
        app[STREAMS] = StreamRegistry()
    app.router.add_post(f"{prefix}/v1/query", query)
    app.router.add_post(f"{prefix}/v1/streaming_query", streaming_query)
    app.router.add_post(f"{prefix}/v1/streaming_query/interrupt", interrupt)
