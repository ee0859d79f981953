"""The one middleware every request passes: request id, CORS, authentication,
authorization (the route's action, `gateway/http/operations.py`) and the error envelope.
One function instead of five keeps the per-request cost to one coroutine frame on the
hot path, with metrics and the access line on too: their start and end are two calls
in it (`observability/http.py` `request_hooks`)."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
from typing import Any, Awaitable, Callable, Mapping

from aiohttp import web
from aiohttp.typedefs import Middleware

from gateway.config import DEFAULT_USER_ID, DEFAULT_USERNAME, AuthenticationConfig, ServiceConfig
from gateway.config.service import CorsConfig
from gateway.http.operations import AUTHENTICATED_ONLY
from gateway.http.responses_io import json_response
from gateway.http.services import PUBLIC, SERVICES, SKIP_WITHOUT_CREDENTIAL
from gateway.identity import Identity
from gateway.identity.audit import REFUSALS, log_refusal
from gateway.observability.http import CLIENT_CLOSED, UNOBSERVED, HttpObserver, auth_failure_reason, request_hooks
from gateway.observability.requests import RequestObserver
from gateway.schema.errors import (ApiError, body_too_large, database_error, endpoint_forbidden, header_too_large,
                                   internal_error, method_not_allowed, route_not_found)
from gateway.storage.database import DatabaseUnavailable
from gateway.request_scope import REQUEST
from gateway.turns.run import client_left

log = logging.getLogger("gateway.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# A client's X-Request-ID is kept only when it is a plain token: it is echoed in
# headers and written to logs.
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# Paths OpenAI SDKs call: their errors also carry OpenAI's `error` object
# (docs/architecture.md, decision 3: errors serve two audiences). Every other
# endpoint answers exactly as LCORE.
_OPENAI_PATHS = ("/v1/responses", "/v1/models", "/v1/conversations")


# Ids the gateway makes: a keyed hash of a counter, formatted as a version-4 UUID. As
# unguessable as uuid4 (the key is 32 random bytes, never shown) without a getrandom()
# call per request, which releases the GIL and can leave the request waiting for it.
_ID_KEY = os.urandom(32)
_ID_COUNTER = itertools.count()


def request_id(header: str | None) -> str:
    """The client's id when it is acceptable, else a new unguessable one: later work uses
    the gateway's ids as handles (interrupts)."""
    if header is not None and _CLIENT_REQUEST_ID.fullmatch(header):
        return header
    digest = hashlib.blake2b(next(_ID_COUNTER).to_bytes(8, "little"), key=_ID_KEY, digest_size=16).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-{'89ab'[int(digest[16], 16) & 3]}{digest[17:20]}-{digest[20:]}"


def _http_error(exc: web.HTTPException, request: web.Request) -> ApiError:
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return body_too_large(request.app._client_max_size)
    if isinstance(exc, web.HTTPNotFound):
        return route_not_found(request.path)
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return method_not_allowed(request.method, request.path, ",".join(sorted(exc.allowed_methods)))
    return ApiError(exc.status, exc.reason, exc.text or exc.reason, code=exc.reason.lower().replace(" ", "_"),
                    detail=exc.reason)


# LCORE's identity for a probe let through without a credential.
_NO_AUTH = Identity(user_id=DEFAULT_USER_ID, username=DEFAULT_USERNAME, skip_userid_check=True)


def gateway_middleware(service: ServiceConfig, authentication: AuthenticationConfig,
                       route_actions: Mapping[Any, str], observer: HttpObserver | None = None,
                       requests: RequestObserver | None = None) -> Middleware:
    """`route_actions`: each route's action (`openapi.route_actions`); the application
    fills it in once its routes are registered. `observer`: the request metrics (None:
    metrics off). `requests`: the access line and the request's span (None: neither)."""
    cors = service.cors
    origins = set(cors.allow_origins)
    module = authentication.module
    actions = route_actions
    max_header = service.max_header_bytes
    openai_paths = _OPENAI_PATHS + tuple(service.root_path + path for path in _OPENAI_PATHS) \
        if service.error_body == "both" else ()

    def cors_headers(request: web.Request) -> dict[str, str]:
        origin = request.headers.get("Origin")
        if origin is None or ("*" not in origins and origin not in origins):
            return {}
        headers = {"Access-Control-Allow-Origin": origin if cors.allow_credentials or "*" not in origins else "*",
                   "Vary": "Origin"}
        if cors.allow_credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        return headers

    def error_response(error: ApiError, request: web.Request, extra: dict[str, str]) -> web.Response:
        openai = request.path.startswith(openai_paths) if openai_paths else False
        return json_response(error.body(openai), error.status, {**extra, **error.headers})

    async def admit(request: web.Request, match: Any) -> None:
        """The request's headers, caller and route action checked: raises the refusal
        (`match`: its `match_info`)."""
        # aiohttp's parser lets headers up to the body limit through (http/header_limits.py)
        # so that a large one is refused here, in the envelope, before anything reads it.
        for name, value in request.raw_headers:
            if len(name) + len(value) > max_header:
                raise header_too_large(max_header)
        if match.http_exception is not None or match.handler in request.app[PUBLIC]:
            return
        authenticator = request.app[SERVICES].authenticator
        if match.handler in request.app[SKIP_WITHOUT_CREDENTIAL] \
                and authenticator.credential_header not in request.headers:
            # LCORE: a probe without credentials skips authentication and authorization.
            request["identity"] = _NO_AUTH
            if observer is not None:
                observer.authenticated("skipped", "probe")
            return
        if observer is None:
            caller = await authenticator.authenticate(request.headers, request.query)
        else:
            try:
                caller = await authenticator.authenticate(request.headers, request.query)
            except ApiError as exc:
                observer.authenticated("failure", auth_failure_reason(
                    exc.status, authenticator.credential_header in request.headers))
                raise
        request["identity"] = caller
        action = actions[match.route]
        allowed = action == AUTHENTICATED_ONLY or action in caller.actions
        if observer is not None:   # authenticated, and the action checked
            observer.passed(action if action != AUTHENTICATED_ONLY else None, allowed)
        if not allowed:
            raise endpoint_forbidden(caller.user_id)

    hooks = request_hooks(observer, requests)
    begin, end = hooks if hooks is not None else (None, None)

    async def handle(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The observers' start and end are calls here, not a middleware around this one:
        # every await of the handler would resume that frame too (bench/README.md, "Metrics").
        match = request.match_info
        began = begin(request, match) if begin is not None else UNOBSERVED
        rid = request_id(request.headers.get("X-Request-ID"))
        request["request_id"] = rid
        REQUEST.set((rid, began[0]))   # the id is sent upstream with every call this request makes
        extra = {"X-Request-ID": rid, **cors_headers(request)}
        status, websocket = 500, False
        response: web.StreamResponse
        try:
            try:
                if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
                    response = _preflight(request, cors, extra)
                else:
                    await admit(request, match)
                    response = await handler(request)
                    if not response.prepared:
                        response.headers.update(extra)
            except ApiError as exc:
                if exc.status in REFUSALS:
                    log_refusal(_route(request), request.remote, rid, module, exc)
                response = error_response(exc, request, extra)
            except web.HTTPException as exc:
                response = error_response(_http_error(exc, request), request, extra)
            except DatabaseUnavailable as exc:
                # The route's template, never the raw path: a path may name a user (/v1/quotas/users/…).
                log.error("database unavailable on %s (request %s): %s", _route(request), rid, exc)
                response = error_response(database_error(), request, extra)
            except Exception as exc:
                if client_left(exc):
                    raise   # no answer to write: counted below
                log.exception("unhandled error on %s (request %s)", _route(request), rid)
                response = error_response(internal_error(), request, extra)
            status = response.status
            return response
        except BaseException as exc:
            if client_left(exc):
                status = CLIENT_CLOSED   # the client left before its answer was complete
                websocket = request.headers.get("Upgrade", "").lower() == "websocket"   # a socket dropped
            raise
        finally:
            if end is not None:
                end(began, request, status, websocket)

    return web.middleware(handle)


def _preflight(request: web.Request, cors: CorsConfig, headers: dict[str, str]) -> web.Response:
    if "Access-Control-Allow-Origin" not in headers:
        return web.Response(status=403, text="CORS origin not allowed")
    methods = cors.allow_methods
    asked = request.headers.get("Access-Control-Request-Headers", "")
    return web.Response(status=204, headers={
        **headers,
        "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS" if "*" in methods else ", ".join(methods),
        "Access-Control-Allow-Headers": asked if "*" in cors.allow_headers else ", ".join(cors.allow_headers),
        "Access-Control-Max-Age": "600",
    })


def _route(request: web.Request) -> str:
    """The method and route template of a request, for the audit and error lines."""
    resource = request.match_info.route.resource
    return f"{request.method} {resource.canonical if resource is not None else request.path}"
