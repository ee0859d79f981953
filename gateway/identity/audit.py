"""One structured log line per refused request (401, 403, 431, and 429 later): which
module refused, why, on which route, from where, under which request id. Never a token,
an API key or an identity header value: the cause is the gateway's own text."""

from __future__ import annotations

import logging

log = logging.getLogger("gateway.audit")

REFUSALS = frozenset({401, 403, 431})


def log_refusal(route: str, client: str | None, request_id: str | None, module: str, status: int,
                cause: str) -> None:
    """`route` is the method and the route template (`POST /v1/responses`), never a raw
    path with ids in it where a template exists."""
    log.warning("refused status=%d module=%s route=%s client=%s request_id=%s cause=%r",
                status, module, route, client, request_id, cause)
