"""`/v1/responses`: create (JSON or SSE), and retrieve / delete / input_items of
responses the caller owns (404 for any other, so ids cannot be probed). In engine mode
the stored responses are the gateway's own (`engine_responses.py`); forwarded ones
are read from the upstream."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from aiohttp import web
from multidict import MultiDict

from gateway.http import background, engine_responses
from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES
from gateway.http.sse import relay
from gateway.schema.errors import ApiError, not_found
from gateway.storage.conversations import TurnRecord
from gateway.streaming.repair import repair_input_items, repair_response


async def create_response(request: web.Request) -> web.StreamResponse:
    services = request.app[SERVICES]
    pipeline = services.pipeline
    turn = await pipeline.prepare(identity(request), await read_json(request), request.headers)
    if turn.background:
        return await background.create(request, turn)
    if turn.stream:
        return await relay(request, pipeline, turn)
    try:
        result = repair_response(await pipeline.backend_of(turn).respond(turn))
        turn.result = result
        quotas = await pipeline.settle(turn)
    except asyncio.CancelledError:
        turn.abandoned = True  # the client left before the answer
        raise
    finally:
        pipeline.finish(turn)
    pipeline.enricher(turn).finish(result, quotas)
    return json_response(result)


async def _owned_turn(request: web.Request) -> TurnRecord:
    services = request.app[SERVICES]
    response_id = request.match_info["response_id"]
    found = await services.pipeline.owned_turn(identity(request), response_id)
    if found is None:
        raise not_found("Response", response_id, code="response_not_found")
    return found


_INPUT_ITEMS_PARAMS = frozenset({"after", "before", "include", "limit", "order"})


def _upstream_path(turn: TurnRecord, suffix: str = "") -> str:
    return f"/v1/responses/{quote(turn.response_id, safe='')}{suffix}"


async def _engine_mode(request: web.Request) -> bool:
    return await request.app[SERVICES].pipeline.uses_engine()


async def get_response(request: web.Request) -> web.StreamResponse:
    shown = await background.retrieve(request)
    if shown is not None:
        return shown
    if await _engine_mode(request):
        return await engine_responses.get_response(request)
    turn = await _owned_turn(request)
    services = request.app[SERVICES]
    reply = await services.upstream.request_ok("GET", _upstream_path(turn))
    response = repair_response(reply.json())
    services.pipeline.stored_enricher(turn).annotate(response)
    return json_response(response)


async def delete_response(request: web.Request) -> web.Response:
    background_too = await background.forget(request)
    try:
        return await _delete_response(request)
    except ApiError as exc:
        if exc.status != 404 or not background_too:
            raise
        # A background response that never became a turn (cancelled, failed): its
        # record was all there was.
        response_id = request.match_info["response_id"]
        return json_response({"id": response_id, "object": "response", "deleted": True})


async def _delete_response(request: web.Request) -> web.Response:
    if await _engine_mode(request):
        return await engine_responses.delete_response(request)
    turn = await _owned_turn(request)
    services = request.app[SERVICES]
    reply = await services.upstream.request_ok("DELETE", _upstream_path(turn))
    await services.conversations.delete_turn(turn.response_id)
    return web.Response(body=reply.body, content_type="application/json")


async def list_input_items(request: web.Request) -> web.Response:
    if await _engine_mode(request):
        return await engine_responses.list_input_items(request)
    turn = await _owned_turn(request)
    services = request.app[SERVICES]
    # Only the listing's own parameters go upstream (not `user_id` or anything else).
    params = MultiDict((key, value) for key, value in request.query.items() if key in _INPUT_ITEMS_PARAMS)
    reply = await services.upstream.request_ok("GET", _upstream_path(turn, "/input_items"), params=params)
    return web.Response(body=repair_input_items(reply.body), content_type="application/json")


async def list_responses(request: web.Request) -> web.Response:
    if await _engine_mode(request):
        return await engine_responses.list_responses(request)
    # The upstream's list is every user's: the gateway would have to filter it.
    raise ApiError(501, "Not implemented", "Listing responses is available in engine mode only "
                   "(llama_stack.api: chat_completions).", code="not_implemented")


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_post(f"{prefix}/v1/responses", create_response)
    app.router.add_get(f"{prefix}/v1/responses", list_responses)
    app.router.add_get(f"{prefix}/v1/responses/{{response_id}}", get_response)
    app.router.add_delete(f"{prefix}/v1/responses/{{response_id}}", delete_response)
    app.router.add_get(f"{prefix}/v1/responses/{{response_id}}/input_items", list_input_items)
    app.router.add_post(f"{prefix}/v1/responses/{{response_id}}/cancel", background.cancel)
