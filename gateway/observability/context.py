"""The route template of the request being handled, for observers that see a turn but
not its request (the turn hooks' `endpoint` label). Set by the middleware; a background
run's task inherits it from the request that started it."""

from __future__ import annotations

from contextvars import ContextVar

# `/v1/responses` etc., `root_path` stripped; "" outside a request.
ENDPOINT: ContextVar[str] = ContextVar("gateway_endpoint", default="")
