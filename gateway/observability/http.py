"""What the middleware records per request: LCORE's REST call counter and duration
histogram by route template, in-flight requests, authentication attempts and route
authorization checks. One call at the start and one at the end of a request; label
children are bound once per route and status and kept."""

from __future__ import annotations

import time
from typing import Any

from gateway.observability.context import ENDPOINT
from gateway.observability.metrics import Metrics

# The route LCORE does not count in `ls_rest_api_calls_total` (it still times it).
METRICS_PATH = "/metrics"


class HttpObserver:
    def __init__(self, metrics: Metrics, root_path: str, auth_module: str):
        self._hot = metrics.hot
        self._duration = metrics.metric("ls_response_duration_seconds")
        self._auth = metrics.metric("ls_auth_attempts_total")
        self._authz = metrics.metric("ls_authorization_checks_total")
        self._root_path = root_path
        self._module = auth_module
        self._templates: dict[Any, str] = {}       # aiohttp route → its template, root_path stripped
        self._timers: dict[str, Any] = {}           # template → its duration child
        self._auth_children: dict[tuple[str, str], Any] = {}
        self._authz_children: dict[tuple[str, str], Any] = {}

    def template(self, route: Any) -> str:
        """A matched route's path template (`/v1/responses/{response_id}`), never the raw path."""
        template = self._templates.get(route)
        if template is None:
            template = route.resource.canonical if route.resource is not None else ""
            root = self._root_path
            if root and (template == root or template.startswith(root + "/")):
                template = template[len(root):] or "/"
            self._templates[route] = template
        return template

    def started(self, route: Any) -> tuple[str, float]:
        """A request to a known route (None: unknown, 404/405: not counted, as LCORE)."""
        self._hot.in_flight += 1
        template = self.template(route) if route is not None else ""
        if template:
            ENDPOINT.set(template)
        return template, time.perf_counter()

    def ended(self, started: tuple[str, float], status: int, websocket: bool) -> None:
        self._hot.in_flight -= 1
        template, at = started
        if not template:
            return
        if template != METRICS_PATH:
            key = (template, str(status))
            calls = self._hot.rest_calls
            calls[key] = calls.get(key, 0) + 1
        if websocket:
            return   # a WebSocket's "duration" is its session: not a response time
        timer = self._timers.get(template)
        if timer is None:
            timer = self._timers[template] = self._duration.labels(template)
        timer.observe(time.perf_counter() - at)

    def authenticated(self, result: str, reason: str) -> None:
        key = (result, reason)
        child = self._auth_children.get(key)
        if child is None:
            child = self._auth_children[key] = self._auth.labels(self._module, result, reason)
        child.inc()

    def authorized(self, action: str, allowed: bool) -> None:
        key = (action, "allowed" if allowed else "denied")
        child = self._authz_children.get(key)
        if child is None:
            child = self._authz_children[key] = self._authz.labels(*key)
        child.inc()


def auth_failure_reason(status: int, had_credential: bool) -> str:
    """The bounded reason of a refused authentication (metrics.AUTH_REASONS)."""
    if status == 401:
        return "invalid_credential" if had_credential else "no_credential"
    if status == 403:
        return "forbidden"
    return "provider_unavailable"
