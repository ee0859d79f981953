"""Wiring: routes, the one middleware (recording + JSON 404/405), the test endpoints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from . import chat, conversations, moderations, responses, responses_read
from .recording import Recorder
from .shapes import json_response, not_found
from .state import STATE, STREAMING, ServerState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
VERSION_BODY = orjson.dumps({"version": "0.7.3"})
_METHOD_NOT_ALLOWED = orjson.dumps({"detail": "Method Not Allowed"})


def _routes(responses_on: bool, conversations_on: bool) -> list[tuple[str, str, Handler, str]]:
    """(method, path, handler, provider type shown by /v1/inspect/routes)."""
    routes: list[tuple[str, str, Handler, str]] = [
        ("GET", "/health", chat.health, ""),
        ("GET", "/v1/health", chat.health, ""),
        ("GET", "/v1/version", version, ""),
        ("GET", "/v1/models", chat.list_models, ""),
        ("GET", "/v1/models/{model_id:.+}", chat.get_model, ""),
        ("POST", "/v1/chat/completions", chat.chat_completions, "remote::vllm"),
        ("POST", "/v1/embeddings", chat.embeddings, "remote::vllm"),
        ("POST", "/v1/moderations", moderations.moderations, ""),
    ]
    if responses_on:
        routes += [
            ("POST", "/v1/responses", responses.create_response, "inline::builtin"),
            ("GET", "/v1/responses", responses_read.list_responses, "inline::builtin"),
            ("GET", "/v1/responses/{response_id}", responses_read.get_response,
             "inline::builtin"),
            ("DELETE", "/v1/responses/{response_id}", responses_read.delete_response,
             "inline::builtin"),
            ("GET", "/v1/responses/{response_id}/input_items", responses_read.input_items,
             "inline::builtin"),
            ("POST", "/v1/responses/{response_id}/cancel", responses_read.cancel_response,
             "inline::builtin"),
            ("GET", "/v1/inspect/routes", inspect_routes, ""),
        ]
    if responses_on and conversations_on:
        conv = "/v1/conversations/{conversation_id}"
        routes += [
            ("POST", "/v1/conversations", conversations.create, ""),
            ("GET", conv, conversations.get, ""),
            ("POST", conv, conversations.update, ""),
            ("DELETE", conv, conversations.delete, ""),
            ("POST", conv + "/items", conversations.add_items, ""),
            ("GET", conv + "/items", conversations.list_items, ""),
            ("GET", conv + "/items/{item_id}", conversations.get_item, ""),
            ("DELETE", conv + "/items/{item_id}", conversations.delete_item, ""),
        ]
    return routes


ROUTE_TABLE: web.AppKey[list[dict[str, object]]] = web.AppKey("scripted_routes", list)


async def version(request: web.Request) -> web.Response:
    return web.Response(body=VERSION_BODY, content_type="application/json")


async def inspect_routes(request: web.Request) -> web.Response:
    """Llama Stack's shape: {"data": [{"route", "method", "provider_types"}]}."""
    return json_response({"data": request.app[ROUTE_TABLE]})


async def recorded_requests(request: web.Request) -> web.Response:
    return json_response(request.app[STATE].recorder.snapshot())


async def clear_recorded(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.recorder.clear()
    state.mcp_definitions.clear()
    return json_response({"cleared": True})


async def open_counts(request: web.Request) -> web.Response:
    """Requests being handled right now, and how many of them are SSE streams."""
    state = request.app[STATE]
    return json_response({"open_requests": state.open_requests,
                          "open_streams": state.open_streams})


async def mcp_definitions(request: web.Request) -> web.Response:
    """Every MCP tool definition received in /v1/responses, headers and all."""
    return json_response(list(request.app[STATE].mcp_definitions))


def _middleware(state: ServerState) -> Callable[..., Awaitable[web.StreamResponse]]:
    recorder = state.recorder
    record = recorder.active

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The test endpoints are neither recorded nor counted.
        counted = not request.path.startswith("/_scripted/")
        if counted:
            if record:
                body = await request.read() if request.body_exists else b""
                recorder.add(request.method, request.path, request.query_string,
                             request.raw_headers, body)
            state.open_requests += 1
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return not_found()
        except web.HTTPMethodNotAllowed:
            return web.Response(body=_METHOD_NOT_ALLOWED, status=405,
                                content_type="application/json")
        finally:
            if counted:
                state.open_requests -= 1
                if request.get(STREAMING):
                    state.open_streams -= 1

    return middleware


def create_app(*, responses: bool = True, conversations: bool = True, delay_ms: float = 0,
               record: bool = True, log_path: str | None = None, dialect: str = "llama-stack",
               chat_deltas: int | None = None, llama_stack_items: bool = False,
               provider_ids: bool = False) -> web.Application:
    """The scripted upstream as an aiohttp application.

    responses=False emulates a Chat-Completions-only server (no /v1/responses*,
    /v1/conversations*, /v1/inspect/routes); conversations=False emulates a Responses
    server without a Conversations API. delay_ms paces every stream event (and delays
    every JSON answer). dialect frames /v1/responses streams as Llama Stack does
    ("llama-stack") or as OpenAI does ("openai"). chat_deltas: the number of text pieces of
    every chat completion stream, for callers that cannot send the scripted_deltas knob
    (Llama Stack does not forward `metadata`). llama_stack_items: conversation items as
    Llama Stack 0.7.3 times, orders and reads them (`conversations.py`). provider_ids lists
    the models as Llama Stack names them (`scripted/scripted-chat`, the provider in
    `custom_metadata`). record keeps the last requests for GET /_scripted/requests;
    log_path appends each request to that file as a JSON line.
    """
    recorder = Recorder(enabled=record, log_path=log_path)
    state = ServerState(responses_enabled=responses, conversations_enabled=conversations,
                        delay_ms=float(delay_ms), recorder=recorder, dialect=dialect, chat_deltas=chat_deltas,
                        llama_stack_items=llama_stack_items, provider_ids=provider_ids)
    # Large request bodies (long histories) are normal for a model server.
    app = web.Application(middlewares=[_middleware(state)], client_max_size=64 * 2**20)
    app[STATE] = state
    table: list[dict[str, object]] = []
    for method, path, handler, provider in _routes(responses, responses and conversations):
        app.router.add_route(method, path, handler)
        route = path.replace("{model_id:.+}", "{model_id:path}")
        table.append({"route": route, "method": method,
                      "provider_types": [provider] if provider else []})
    app[ROUTE_TABLE] = table
    app.router.add_get("/_scripted/requests", recorded_requests)
    app.router.add_delete("/_scripted/requests", clear_recorded)
    app.router.add_get("/_scripted/mcp", mcp_definitions)
    app.router.add_get("/_scripted/open", open_counts)

    async def close_log(_: web.Application) -> None:
        recorder.close()

    app.on_cleanup.append(close_log)
    return app
