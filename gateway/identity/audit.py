"""One structured log line per refused request (401, 403, 431, and 429 later): which
module refused, why, on which route, from where, under which request id, and the user
a refusal names, as log lines name users (`user_ids.py`: the access line's keyed hash
unless `service.audit_user_ids: raw`), in its own field and in the cause alike. Never a
token, an API key or an identity header value: the cause is the gateway's own text."""

from __future__ import annotations

import logging

from gateway.schema.errors import ApiError
from gateway.user_ids import logged_user

log = logging.getLogger("gateway.audit")

REFUSALS = frozenset({401, 403, 431})


def log_refusal(route: str, client: str | None, request_id: str | None, module: str, error: ApiError) -> None:
    """`route` is the method and the route template (`POST /v1/responses`), never a raw
    path with ids in it where a template exists."""
    user = logged_user(error.user_id)
    log.warning("refused status=%d module=%s route=%s client=%s request_id=%s user=%s cause=%r",
                error.status, module, route, client, request_id, user, error.logged_cause(user))
