"""The request that code runs for when it never sees the request itself: set once by
the middleware, and inherited by every task the request starts (a background run's too).

`REQUEST.get()` is `(request_id, endpoint)`: the id the gateway sends upstream as
`X-Request-ID` with every call, and the route template (`/v1/responses`, `root_path`
stripped) the turn metrics label with (`""` when metrics are off, or outside a
request). One variable set once per request, a plain tuple: a context variable's `set`
costs as much as the rest of a request's metrics' recording per hook (bench/README.md,
"Metrics")."""

from __future__ import annotations

from contextvars import ContextVar

REQUEST: ContextVar[tuple[str, str]] = ContextVar("gateway_request", default=("", ""))
# The running turn's deadline (the event loop's clock; 0.0: none), set by the runner only
# when `llama_stack.turn_deadline_seconds` is on; the upstream client ends any call of the
# turn still going then (gateway/upstream/client.py).
TURN_DEADLINE: ContextVar[float] = ContextVar("gateway_turn_deadline", default=0.0)
