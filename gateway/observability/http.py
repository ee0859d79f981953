"""What the middleware records per request: LCORE's REST call counter and duration
histogram by route template, in-flight requests, authentication attempts and route
authorization checks. One call at the start and one at the end of a request; label
children are bound once per route and status and kept."""

from __future__ import annotations

import time
from typing import Any

from gateway.observability.context import ENDPOINT
from gateway.observability.plain import FOLD_AT
from gateway.observability.metrics import Metrics

# The route LCORE does not count in `ls_rest_api_calls_total` (it still times it).
METRICS_PATH = "/metrics"


class _Route:
    """One route's template and its bound duration child; its calls by status are
    counted in the hot counters (`rest_calls`, keyed by this template and the int status)."""

    __slots__ = ("template", "timer")

    def __init__(self, template: str, timer: Any):
        self.template = template
        self.timer = timer


class HttpObserver:
    """Each request costs two Python calls here (`started`, `ended`) and one when it is
    authenticated (`passed` or `authenticated`): counters are bumped inline on their
    plain children (`observability/plain.py`), never through `inc()`, because a Python
    call is most of what recording costs."""

    def __init__(self, metrics: Metrics, root_path: str, auth_module: str):
        self._hot = metrics.hot
        self._duration = metrics.metric("ls_response_duration_seconds")
        self._auth = metrics.metric("ls_auth_attempts_total")
        self._authz = metrics.metric("ls_authorization_checks_total")
        self._root_path = root_path
        self._module = auth_module
        self._routes: dict[Any, _Route] = {}        # aiohttp route → its template and timer
        self._auth_children: dict[tuple[str, str], Any] = {}
        self._authz_children: dict[tuple[str, bool], Any] = {}
        self._auth_ok = self._auth.labels(auth_module, "success", "ok")

    def _route(self, route: Any) -> _Route:
        template = route_template(route, self._root_path)
        bound = self._routes[route] = _Route(template, self._duration.labels(template) if template else None)
        return bound

    def started(self, route: Any) -> tuple[_Route | None, float]:
        """A request to a known route (None: unknown, 404/405: not counted, as LCORE)."""
        self._hot.in_flight += 1
        bound = None
        if route is not None:
            bound = self._routes.get(route) or self._route(route)
            if bound.template:
                ENDPOINT.set(bound.template)
            else:
                bound = None
        return bound, time.perf_counter()

    def ended(self, started: tuple[_Route | None, float], status: int, websocket: bool = False) -> None:
        """`websocket`: a WebSocket whose client dropped it (one that ended normally is its 101)."""
        elapsed = time.perf_counter() - started[1]
        self._hot.in_flight -= 1
        bound = started[0]
        if bound is None:
            return
        if bound.template != METRICS_PATH:
            key = (bound.template, status)
            calls = self._hot.rest_calls
            calls[key] = calls.get(key, 0) + 1
        if status == 101 or websocket:
            return   # a WebSocket (switched protocols): its "duration" is its session, not a response time
        pending = bound.timer.pending   # Buckets.observe, inline
        pending.append(elapsed)
        if len(pending) >= FOLD_AT:
            bound.timer.fold()

    def passed(self, action: str | None, allowed: bool) -> None:
        """Authenticated (the common case), then the route's action checked (None: a
        route any authenticated caller may use)."""
        self._auth_ok.value += 1
        if action is not None:
            key = (action, allowed)
            child = self._authz_children.get(key)
            if child is None:
                child = self._authz_children[key] = self._authz.labels(action, "allowed" if allowed else "denied")
            child.value += 1

    def authenticated(self, result: str, reason: str) -> None:
        key = (result, reason)
        child = self._auth_children.get(key)
        if child is None:
            child = self._auth_children[key] = self._auth.labels(self._module, result, reason)
        child.value += 1

    def authorized(self, action: str, allowed: bool) -> None:
        key = (action, allowed)
        child = self._authz_children.get(key)
        if child is None:
            child = self._authz_children[key] = self._authz.labels(action, "allowed" if allowed else "denied")
        child.value += 1


def route_template(route: Any, root_path: str) -> str:
    """A matched route's path template (`/v1/responses/{response_id}`, `root_path`
    stripped), never the raw path."""
    template = route.resource.canonical if route.resource is not None else ""
    if root_path and (template == root_path or template.startswith(root_path + "/")):
        template = template[len(root_path):] or "/"
    return template


def auth_failure_reason(status: int, had_credential: bool) -> str:
    """The bounded reason of a refused authentication (metrics.AUTH_REASONS)."""
    if status == 401:
        return "invalid_credential" if had_credential else "no_credential"
    if status == 403:
        return "forbidden"
    return "provider_unavailable"
