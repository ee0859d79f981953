"""What the middleware records per request: LCORE's REST call counter and duration
histogram by route template, in-flight requests, authentication attempts and route
authorization checks. One call at the start and one at the end of a request; label
children are bound once per route and status and kept."""

from __future__ import annotations

import time
from typing import Any

from gateway.observability.plain import FOLD_AT, Summed, Value
from gateway.observability.metrics import Metrics

# The route LCORE does not count in `ls_rest_api_calls_total` (it still times it).
METRICS_PATH = "/metrics"


class _Route:
    """One route's template, its bound duration child and its calls by status (the
    hot counters' dict for its template, shared by the template's routes; None for
    `/metrics`, which LCORE does not count)."""

    __slots__ = ("template", "timer", "calls")

    def __init__(self, template: str, timer: Any, calls: dict[int, int] | None):
        self.template = template
        self.timer = timer
        self.calls = calls


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
        self._authz_children: dict[str, tuple[Any, Any]] = {}   # action → its (denied, allowed) children
        # Every successful authentication is one route authorization check, or one pass
        # to a route any authenticated caller may use: the success counter is their sum,
        # read at scrape, so a request counts one add instead of two.
        self._open_passes = Value()
        self._passes: list[Value] = [self._open_passes]
        self._auth.derive((auth_module, "success", "ok"), Summed(self._passes))

    def _route(self, route: Any) -> _Route:
        template = route_template(route, self._root_path)
        calls = self._hot.rest_calls.setdefault(template, {}) if template and template != METRICS_PATH else None
        bound = self._routes[route] = _Route(template, self._duration.labels(template) if template else None, calls)
        return bound

    def started(self, route: Any) -> tuple[_Route | None, float]:
        """A request to a known route (None: unknown, 404/405: not counted, as LCORE)."""
        self._hot.in_flight += 1
        bound = None
        if route is not None:
            bound = self._routes.get(route) or self._route(route)
            if not bound.template:
                bound = None
        return bound, time.perf_counter()

    def ended(self, started: tuple[_Route | None, float], status: int, websocket: bool = False) -> None:
        """`websocket`: a WebSocket whose client dropped it (one that ended normally is its 101)."""
        elapsed = time.perf_counter() - started[1]
        self._hot.in_flight -= 1
        bound = started[0]
        if bound is None:
            return
        calls = bound.calls
        if calls is not None:
            calls[status] = calls.get(status, 0) + 1
        if status == 101 or websocket:
            return   # a WebSocket (switched protocols): its "duration" is its session, not a response time
        pending = bound.timer.pending   # Buckets.observe, inline
        pending.append(elapsed)
        if len(pending) >= FOLD_AT:
            bound.timer.fold()

    def passed(self, action: str | None, allowed: bool) -> None:
        """Authenticated (the common case), then the route's action checked (None: a
        route any authenticated caller may use)."""
        if action is None:
            self._open_passes.value += 1
        else:   # counted in the check, and so in the successful authentications (`Summed`)
            (self._authz_children.get(action) or self._authz_pair(action))[allowed].value += 1

    def _authz_pair(self, action: str) -> tuple[Any, Any]:
        pair = self._authz_children[action] = (self._authz.labels(action, "denied"), self._authz.labels(action, "allowed"))
        self._passes.extend(pair)
        return pair

    def authenticated(self, result: str, reason: str) -> None:
        key = (result, reason)
        child = self._auth_children.get(key)
        if child is None:
            child = self._auth_children[key] = self._auth.labels(self._module, result, reason)
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
