"""What the middleware records per request: LCORE's REST call counter and duration
histogram by route template, in-flight requests, authentication attempts and route
authorization checks. One call at the start and one at the end of a request
(`request_hooks`); label children are bound once per route and status and kept."""

from __future__ import annotations

from time import perf_counter
from typing import Any, Callable

from gateway.observability.plain import Summed, Value
from gateway.observability.metrics import Metrics

# The route LCORE does not count in `ls_rest_api_calls_total` (it still times it).
METRICS_PATH = "/metrics"
# The status recorded for a request whose client left mid-answer (nginx's 499).
CLIENT_CLOSED = 499


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
    """A request's start and end are recorded by `request_hooks()`; the middleware calls
    `passed` or `authenticated` once it is authenticated. Counters are
    bumped on their plain children (`observability/plain.py`), never through `inc()`,
    because a Python call is most of what recording costs."""

    def __init__(self, metrics: Metrics, root_path: str, auth_module: str):
        self.hot = metrics.hot
        self._duration = metrics.metric("ls_response_duration_seconds")
        self._auth = metrics.metric("ls_auth_attempts_total")
        self._authz = metrics.metric("ls_authorization_checks_total")
        self._root_path = root_path
        self._module = auth_module
        self.routes: dict[Any, _Route | None] = {}   # aiohttp route → its template and timer (`bind`)
        self._auth_children: dict[tuple[str, str], Any] = {}
        self._authz_children: dict[str, tuple[Any, Any]] = {}   # action → its (denied, allowed) children
        # Every successful authentication is one route authorization check, or one pass
        # to a route any authenticated caller may use: the success counter is their sum,
        # read at scrape, so a request counts one add instead of two.
        self._open_passes = Value()
        self._passes: list[Value] = [self._open_passes]
        self._auth.derive((auth_module, "success", "ok"), Summed(self._passes))

    def bind(self, route: Any) -> _Route | None:
        """A matched route's children, kept (None: a route without a template, not counted)."""
        template = route_template(route, self._root_path)
        if not template:
            self.routes[route] = None
            return None
        calls = self.hot.rest_calls.setdefault(template, {}) if template != METRICS_PATH else None
        bound = self.routes[route] = _Route(template, self._duration.labels(template), calls)
        return bound

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


# What `begin` returns when nothing observes requests: the route template is "" (no
# metric is labelled with it).
UNOBSERVED: tuple[str, Any, Any, float] = ("", None, None, 0.0)

Begin = Callable[[Any, Any], tuple[str, Any, Any, float]]
End = Callable[[tuple[str, Any, Any, float], Any, int, bool], None]


def request_hooks(observer: HttpObserver | None, requests: Any | None) -> tuple[Begin, End] | None:
    """The gateway middleware's two hooks on a request, `begin(request, match)` at its
    start (`match`: the request's `match_info`, which the middleware reads anyway) and
    `end(began, request, status, websocket)` once it is answered (None: nothing observes
    requests): the request metrics (`observer`: in-flight requests, REST calls by route
    and status, response time; None: metrics off) and the access line and request span
    (`requests`, a `RequestObserver`; None: neither). They are two calls in the
    middleware's own coroutine rather than a middleware around it, whose frame every
    await of the request's handler would pass through again (bench/README.md,
    "Metrics"). `begin` returns `(route template, bound route, access record, start)`;
    the template labels the turn metrics."""
    if observer is None:
        if requests is None:
            return None

        def logged(request: Any, match: Any) -> tuple[str, Any, Any, float]:
            return ("", None, requests.begin(request), 0.0)

        def logged_end(began: tuple[str, Any, Any, float], request: Any, status: int, websocket: bool) -> None:
            requests.end(began[2], request, status)
        return logged, logged_end
    begin, end = _metered(observer)
    if requests is None:
        return begin, end

    def both(request: Any, match: Any) -> tuple[str, Any, Any, float]:
        began = begin(request, match)
        return (began[0], began[1], requests.begin(request), began[3])

    def both_end(began: tuple[str, Any, Any, float], request: Any, status: int, websocket: bool) -> None:
        end(began, request, status, websocket)
        requests.end(began[2], request, status)
    return both, both_end


def _metered(observer: HttpObserver) -> tuple[Begin, End]:
    """The request metrics' own hooks (subscripts, not `.get` calls: every request runs
    them)."""
    hot, routes, bind = observer.hot, observer.routes, observer.bind

    def begin(request: Any, match: Any) -> tuple[str, Any, Any, float]:
        hot.in_flight += 1
        try:
            bound = routes[match.route]
        except KeyError:
            # A request no route matched (404/405) is not counted, as LCORE; its route is
            # made per request, so never kept.
            bound = bind(match.route) if match.http_exception is None else None
        if bound is None:
            return UNOBSERVED
        return (bound.template, bound, None, perf_counter())

    def end(began: tuple[str, Any, Any, float], request: Any, status: int, websocket: bool) -> None:
        hot.in_flight -= 1
        bound = began[1]
        if bound is None:
            return
        elapsed = perf_counter() - began[3]
        calls = bound.calls
        if calls is not None:
            try:
                calls[status] += 1
            except KeyError:
                calls[status] = 1
        # A WebSocket (switched protocols, or dropped): its "duration" is its session, not
        # a response time.
        if status != 101 and not websocket:
            bound.timer.pending.append(elapsed)   # Buckets.observe, inline (folded every second)
    return begin, end


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
