"""Health probes, with LCORE's probe bodies (not the error envelope)."""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.http.drain import DRAIN
from gateway.http.responses_io import json_response
from gateway.http.services import SERVICES
from gateway.schema.errors import ApiError
from gateway.upstream.breaker import CLOSED, OPEN, CircuitBreaker

log = logging.getLogger("gateway.http")
PROBE_TIMEOUT = 5.0


async def liveness(request: web.Request) -> web.Response:
    return json_response({"alive": True})


async def readiness(request: web.Request) -> web.Response:
    drain = request.app.get(DRAIN)
    if drain is not None and drain.active:   # SIGTERM: a load balancer stops sending here
        return json_response({"ready": False, "reason": "Service is shutting down", "overall_status": "unhealthy",
                              "impacts": ["New requests are not accepted"], "providers": []}, status=503)
    services = request.app[SERVICES]
    problems: list[tuple[str, list[str]]] = []
    try:
        await services.db.ping()
    except Exception as exc:  # any database failure means not ready
        log.warning("readiness: database unavailable: %s", exc)
        problems.append(("Database unavailable", ["Conversations and turns cannot be stored"]))
    try:
        reply = await services.upstream.request("GET", "/v1/models", timeout=PROBE_TIMEOUT)
        if not reply.ok:
            problems.append((f"Backend service answered HTTP {reply.status}", ["LLM inference unavailable"]))
    except ApiError:
        if services.degraded and not problems:
            # LCORE's degraded mode: started without the upstream, ready to serve what needs
            # none; its body exactly (degraded_mode_startup.feature).
            return json_response({"ready": True, "reason": "Service running in degraded mode",
                                  "overall_status": "degraded",
                                  "impacts": ["LLM inference unavailable", "RAG functionality unavailable",
                                              "Agent tools unavailable"],
                                  "providers": []})
        problems.append((_unreachable(services.upstream.breaker),
                         ["LLM inference unavailable", "Provider health checks unavailable"]))
    if problems:
        return json_response({"ready": False, "reason": "; ".join(reason for reason, _ in problems),
                              "overall_status": "unhealthy",
                              "impacts": [impact for _, impacts in problems for impact in impacts],
                              "providers": []}, status=503)
    return json_response({"ready": True, "reason": "All providers are healthy", "overall_status": "healthy",
                          "impacts": None, "providers": []})


def _unreachable(breaker: CircuitBreaker | None) -> str:
    """The reason an unreachable upstream gives, with its circuit's state when it is not closed."""
    if breaker is None or breaker.state == CLOSED:
        return "Cannot connect to backend service"
    if breaker.state == OPEN:
        return (f"Cannot connect to backend service (circuit breaker open after {breaker.failures} failures; "
                f"next probe in {breaker.retry_in():.0f} s)")
    return "Cannot connect to backend service (circuit breaker half-open: probing)"


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/liveness", liveness)
    app.router.add_get(f"{prefix}/readiness", readiness)


# Probes are authenticated like every endpoint (LCORE); `skip_for_health_probes` lets
# requests without a credential through (kubelet probes carry none).
PROBE_HANDLERS = frozenset({liveness, readiness})
