"""The hooks every outbound HTTP call of the gateway goes through: the trace context
(W3C `traceparent`) and the call's CLIENT span. Only the wiring installs them, once,
when tracing is on (`observability/tracing.py`: `OutboundTracing`); with tracing off
nothing is installed, a call costs a None check and no OpenTelemetry module is loaded.

Two kinds of client, one installation:
- the gateway's own HTTP/1.1 client (`upstream/client.py`): every `UpstreamClient`,
  whoever builds it (the upstream's, the engine's web_search, vector-store search and
  moderation endpoints), is handed to `client()` when it is made, which gives it its
  `outgoing` header hook and its span hooks;
- aiohttp sessions (identity providers' JWKS and Kubernetes calls, the MCP OAuth
  probe): `trace_configs(name)` is their `trace_configs=` argument, aiohttp's own
  per-request hooks, which add the headers and open and close the span.
"""

from __future__ import annotations

from typing import Any


class OutboundHooks:
    def client(self, client: Any) -> None:
        """A new `UpstreamClient`: set its `outgoing` and `hooks`."""

    def trace_configs(self, name: str) -> list[Any]:
        """aiohttp `TraceConfig`s for a session whose calls are spans named `name`."""
        return []


_HOOKS: OutboundHooks | None = None


def install(hooks: OutboundHooks | None) -> None:
    global _HOOKS
    _HOOKS = hooks


def client_made(client: Any) -> None:
    if _HOOKS is not None:
        _HOOKS.client(client)


def trace_configs(name: str) -> list[Any] | None:
    """The `trace_configs=` of an aiohttp session (None: aiohttp's default, no hooks)."""
    return _HOOKS.trace_configs(name) if _HOOKS is not None else None
