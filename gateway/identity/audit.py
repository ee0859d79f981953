"""One structured log line per refused request (401, 403, 431, and 429 later): which
module refused, why, on which route, from where, under which request id. Never a token,
an API key or an identity header value: the cause is the gateway's own text."""

from __future__ import annotations

import logging

from aiohttp import web

log = logging.getLogger("gateway.audit")

REFUSALS = frozenset({401, 403, 431})


def log_refusal(request: web.Request, module: str, status: int, cause: str) -> None:
    route = request.match_info.route.resource
    log.warning("refused status=%d module=%s route=%s client=%s request_id=%s cause=%r",
                status, module, f"{request.method} {route.canonical if route is not None else request.path}",
                request.remote, request.get("request_id"), cause)
