"""One request's observation, shared by its access line and its trace: the middleware
begins and ends it (`RequestObserver`), the runner's hooks (`RequestTurns`) and the
upstream client's (`RequestUpstream`) fill in what the turn it ran did. The record is
found through a context variable the middleware sets, so the turn code never carries it.

A background turn outlives its request: what it does after the POST was answered is in
its own spans (tracing) but not in the request's line, which is written when the POST ends.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any, Callable

from gateway.observability.http import route_template
from gateway.turns.hooks import TurnHooks
from gateway.turns.turn import Turn
from gateway.upstream.client import UpstreamHooks


class RequestRecord:
    __slots__ = ("started", "first_event", "streamed", "model", "input_tokens", "output_tokens", "upstream",
                 "span", "context_token", "prompt", "completion")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_event: float | None = None   # seconds from the request's start
        self.streamed = False
        self.model: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.upstream = 0.0                      # seconds the upstream took to answer, all calls
        self.span: Any = None                    # the request's span (tracing on)
        self.context_token: Any = None
        self.prompt: Any = None                  # kept only with observability.trace_content
        self.completion: str | None = None


CURRENT: ContextVar[RequestRecord | None] = ContextVar("gateway_request_record", default=None)


class RequestObserver:
    """What the middleware calls once at a request's start and once at its end.
    `access`: the access line's writer (None: `service.access_log: false`); `tracing`:
    the request spans (`tracing.RequestTracing`, None: tracing off)."""

    def __init__(self, access: Any | None, tracing: Any | None, root_path: str, hasher: Callable[[str], str]):
        self._access = access
        self._tracing = tracing
        self._root_path = root_path
        self._hash = hasher
        self._templates: dict[Any, str] = {}

    def template(self, request: Any) -> str:
        """The route template (`/v1/responses/{response_id}`, `root_path` stripped), never
        the raw path; "" for a request no route matched."""
        match = request.match_info
        if match.http_exception is not None:
            return ""
        route = match.route
        template = self._templates.get(route)
        if template is None:
            template = self._templates[route] = route_template(route, self._root_path)
        return template

    def begin(self, request: Any) -> RequestRecord:
        record = RequestRecord()
        if self._tracing is not None:
            self._tracing.begin(request, record, self.template(request))
        CURRENT.set(record)
        return record

    def end(self, record: RequestRecord, request: Any, status: int) -> None:
        duration = time.perf_counter() - record.started
        identity = request.get("identity")
        user = self._hash(identity.user_id) if identity is not None else None
        if self._tracing is not None:
            self._tracing.end(record, request, status, user)
        if self._access is not None:
            self._access.write(record, request, self.template(request), status, duration, user)


class RequestTurns(TurnHooks):
    """The runner's moments, into the request's record: model, tokens, first event."""

    shielded = True

    def __init__(self, keep_content: bool = False):
        self._keep_content = keep_content

    def first_event(self, turn: Turn) -> None:
        record = CURRENT.get()
        if record is not None and record.first_event is None:
            record.first_event = time.perf_counter() - record.started

    def streamed(self, turn: Turn, events: int) -> None:
        record = CURRENT.get()
        if record is not None:
            record.streamed = True

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        record = CURRENT.get()
        if record is None:
            return
        try:
            record.model = turn.plan.display_model
            result = turn.outcome.result
            result = result if result.__class__ is dict else None
            usage = result.get("usage") if result is not None else turn.usage
            if usage.__class__ is dict:
                record.input_tokens = usage.get("input_tokens")
                record.output_tokens = usage.get("output_tokens")
            if self._keep_content:
                record.prompt = turn.body.get("input")
                record.completion = _output_text(result)
        except Exception:  # shielded: an observer never fails a turn
            import logging
            logging.getLogger("gateway.observability").exception("request record: finished failed")


def _output_text(result: dict[str, Any] | None) -> str | None:
    if result is None:
        return None
    texts = [part.get("text", "") for item in result.get("output") or () if isinstance(item, dict)
             and item.get("type") == "message" for part in item.get("content") or () if isinstance(part, dict)]
    return "".join(texts) or None


class RequestUpstream(UpstreamHooks):
    """The upstream calls' time, added up into the request's record."""

    def answered(self, path: str, status: int, seconds: float) -> None:
        record = CURRENT.get()
        if record is not None:
            record.upstream += seconds

    def failed(self, path: str, outcome: str, seconds: float) -> None:
        record = CURRENT.get()
        if record is not None:
            record.upstream += seconds
