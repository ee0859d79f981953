"""`/v1/responses`: create (JSON or SSE), and retrieve / delete / input_items / list of
responses the caller owns (404 for any other, so ids cannot be probed). Each handler
parses, hands the work to the turn service or the backend it chose, and writes what
comes back."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.http import background, websocket
from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES
from gateway.http.sse import relay
from gateway.schema.errors import ApiError, not_found
from gateway.schema.json_types import JsonObject
from gateway.turns.run import BodySink
from gateway.turns.turn import Backend


class _JsonBody(BodySink):
    def __init__(self) -> None:
        self.response: dict[str, Any] = {}

    async def body(self, response: JsonObject) -> None:
        self.response = response


async def create_response(request: web.Request) -> web.StreamResponse:
    turns = request.app[SERVICES].turns
    turn = await turns.prepare(identity(request), await read_json(request), request.headers)
    if turn.plan.background:
        return await background.create(request, turn)
    if turn.plan.stream:
        return await relay(request, turns, turn)
    sink = _JsonBody()
    await turns.run(turn, sink)
    return json_response(sink.response)


async def _backend(request: web.Request) -> Backend:
    return await request.app[SERVICES].turns.backend()


def _found(found: Any, request: web.Request) -> web.Response:
    """The backend's answer about a response of the caller's; None: there is none."""
    if found is None:
        raise not_found("Response", request.match_info["response_id"], code="response_not_found")
    if isinstance(found, bytes):  # as the upstream sent it
        return web.Response(body=found, content_type="application/json")
    return json_response(found)


async def get_response(request: web.Request) -> web.StreamResponse:
    shown = await background.retrieve(request)
    if shown is not None:
        return shown
    backend = await _backend(request)
    return _found(await backend.stored(identity(request), request.match_info["response_id"]), request)


async def delete_response(request: web.Request) -> web.Response:
    background_too = await background.forget(request)
    backend = await _backend(request)
    try:
        return _found(await backend.delete(identity(request), request.match_info["response_id"]), request)
    except ApiError as exc:
        if exc.status != 404 or not background_too:
            raise
        # A background response that never became a turn (cancelled, failed): its
        # record was all there was.
        response_id = request.match_info["response_id"]
        return json_response({"id": response_id, "object": "response", "deleted": True})


async def list_input_items(request: web.Request) -> web.Response:
    backend = await _backend(request)
    found = await backend.input_items(identity(request), request.match_info["response_id"], request.query)
    return _found(found, request)


async def list_responses(request: web.Request) -> web.StreamResponse:
    if websocket.is_upgrade(request):   # the same route, told apart by `Upgrade` (docs/websocket.md)
        return await websocket.connect(request)
    backend = await _backend(request)
    return json_response(await backend.list(identity(request), request.query))


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_post(f"{prefix}/v1/responses", create_response)
    app.router.add_get(f"{prefix}/v1/responses", list_responses)
    app.router.add_get(f"{prefix}/v1/responses/{{response_id}}", get_response)
    app.router.add_delete(f"{prefix}/v1/responses/{{response_id}}", delete_response)
    app.router.add_get(f"{prefix}/v1/responses/{{response_id}}/input_items", list_input_items)
    app.router.add_post(f"{prefix}/v1/responses/{{response_id}}/cancel", background.cancel)
