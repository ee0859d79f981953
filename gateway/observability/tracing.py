"""OpenTelemetry traces, imported only when the `OTEL_*` variables turn tracing on
(`otel_env.tracing_requested`): the SDK, its OTLP/HTTP exporter and the spans of every
hop, each hung on a named hook, never in the code it observes.

- The request: a SERVER span per request, child of the client's W3C `traceparent`
  (`RequestTracing`, called by the middleware's `RequestObserver`).
- Authentication and quota: spans around the configured authenticator's
  `authenticate` and the quota service's admission calls (`TracedAuthenticator`,
  `TracedQuota`: wrappers the wiring puts around them).
- Each upstream call: a CLIENT span from the request's sending until its answer's head,
  whose context goes upstream as `traceparent` (`UpstreamTracing`, the client's hooks
  and its `outgoing` headers).
- Every other outbound call: the engine's endpoints' own clients, the MCP OAuth probe,
  identity providers (`OutboundTracing`, installed in `gateway/outbound.py`).
- The engine: a span per model round and per tool call (`EngineTracing`); a tool
  call's span is current while it runs, so the `mcp` package's own spans are its
  children and the `traceparent` it puts in its requests' `_meta` continues the trace.
- The database: the turn writer's group commit serves many turns, so its span is a
  root of its own, linked to each turn's span (`WriterTracing`).

Spans carry the user id only as its keyed hash, and no prompt or completion text
unless `observability.trace_content` is true.
"""

from __future__ import annotations

import asyncio
import logging

from contextvars import ContextVar
from typing import Any, Mapping
from urllib.parse import urlsplit

import orjson
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from gateway.engine.hooks import EngineHooks
from gateway.outbound import OutboundHooks
from gateway.observability.calls import operation
from gateway.observability.requests import RequestRecord
from gateway.upstream.client import UpstreamHooks

log = logging.getLogger("gateway.observability")

SERVICE_NAME = "lightspeed-gateway"
# Text kept in a span attribute with `observability.trace_content` (spans are not a store).
_CONTENT_CHARS = 16 * 1024


class Tracing:
    """The SDK's provider, made the process's global one so that the `mcp` package's
    spans go to the same exporter."""

    def __init__(self, environ: Mapping[str, str], trace_content: bool):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        attributes = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        self.provider = TracerProvider(resource=Resource.create(attributes))
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(self.provider)
        self.tracer = self.provider.get_tracer("gateway")
        self.trace_content = trace_content

    async def close(self) -> None:
        """Export what is still queued (the exporter blocks: off the event loop)."""
        await asyncio.to_thread(self.provider.shutdown)


class RequestTracing:
    def __init__(self, tracing: Tracing):
        self._tracer = tracing.tracer
        self._content = tracing.trace_content

    def begin(self, request: Any, record: RequestRecord, route: str) -> None:
        parent = propagate.extract(request.headers)
        span = self._tracer.start_span(f"{request.method} {route}" if route else request.method, context=parent,
                                       kind=SpanKind.SERVER,
                                       attributes={"http.request.method": request.method, "http.route": route})
        record.span = span
        record.context_token = otel_context.attach(trace.set_span_in_context(span, parent))

    def end(self, record: RequestRecord, request: Any, status: int, user: str | None) -> None:
        span = record.span
        try:
            span.set_attribute("http.response.status_code", status)
            span.set_attribute("gateway.request_id", request.get("request_id") or "")
            if user is not None:
                span.set_attribute("enduser.pseudo.id", user)   # the keyed hash, never the id
            if record.model is not None:
                span.set_attribute("gen_ai.request.model", record.model)
            if record.input_tokens.__class__ is int:
                span.set_attribute("gen_ai.usage.input_tokens", record.input_tokens)
            if record.output_tokens.__class__ is int:
                span.set_attribute("gen_ai.usage.output_tokens", record.output_tokens)
            if record.first_event is not None and record.streamed:
                span.set_attribute("gateway.first_event_ms", round(record.first_event * 1000, 3))
            if self._content:
                if record.prompt is not None:
                    prompt = record.prompt if isinstance(record.prompt, str) else orjson.dumps(record.prompt).decode()
                    span.set_attribute("gen_ai.prompt", prompt[:_CONTENT_CHARS])
                if record.completion is not None:
                    span.set_attribute("gen_ai.completion", record.completion[:_CONTENT_CHARS])
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
        finally:
            span.end()
            otel_context.detach(record.context_token)


def _child(tracer: Any, name: str, kind: SpanKind = SpanKind.INTERNAL, **attributes: Any) -> Any:
    return tracer.start_span(name, kind=kind, attributes=attributes or None)


# The upstream call in flight in this task (one at a time per task: `open()` awaits it).
_UPSTREAM_SPAN: ContextVar[Any] = ContextVar("gateway_upstream_span", default=None)


def _trace_headers(span: Any) -> dict[str, str]:
    """The W3C `traceparent` (and `tracestate`) naming `span`: what an outbound call carries."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


class UpstreamTracing(UpstreamHooks):
    """`outgoing` is the client's per-request header hook: it opens the call's span
    and returns the `traceparent` (and `tracestate`) lines naming it. `name`: the span's
    name for every call (an engine's endpoint); None: `upstream <operation>`."""

    def __init__(self, tracing: Tracing, server: str, name: str | None = None):
        self._tracer = tracing.tracer
        self._server = urlsplit(server).hostname or ""   # the host only: a URL may carry a key
        self._name = name

    def outgoing(self, method: str, path: str) -> bytes:
        span = _child(self._tracer, self._name or f"upstream {operation(path)}", SpanKind.CLIENT, **{
            "http.request.method": method, "url.path": path.split("?", 1)[0], "server.address": self._server})
        _UPSTREAM_SPAN.set(span)
        return "".join(f"{name}: {value}\r\n" for name, value in _trace_headers(span).items()).encode("latin-1")

    def answered(self, path: str, status: int, seconds: float) -> None:
        span = _UPSTREAM_SPAN.get()
        if span is not None:
            _UPSTREAM_SPAN.set(None)
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
            span.end()

    def failed(self, path: str, outcome: str, seconds: float) -> None:
        span = _UPSTREAM_SPAN.get()
        if span is not None:
            _UPSTREAM_SPAN.set(None)
            span.set_status(Status(StatusCode.ERROR, outcome))
            span.end()

    def retried(self, path: str, outcome: str) -> None:
        span = _UPSTREAM_SPAN.get()
        if span is not None:
            span.add_event("retry", {"outcome": outcome})


class OutboundTracing(OutboundHooks):
    """Every other outbound call (`gateway/outbound.py`): the engine's endpoints' own
    clients (web_search, vector-store search, moderation) get the upstream's header hook
    and span hooks; aiohttp sessions (identity providers, the MCP OAuth probe) get
    aiohttp's request hooks, which open a CLIENT span and put its `traceparent` (and the
    request's `X-Request-ID` where the session asks for it) in the request's headers."""

    def __init__(self, tracing: Tracing):
        self._tracing = tracing

    def client(self, client: Any) -> None:
        name = client.display_name.lower().removeprefix("the ")
        traced = UpstreamTracing(self._tracing, client.base_url, name)
        client.outgoing = traced.outgoing
        client.hooks = traced

    def trace_configs(self, name: str) -> list[Any]:
        import aiohttp

        tracer = self._tracing.tracer

        async def started(session: Any, context: Any, params: Any) -> None:
            span = _child(tracer, name, SpanKind.CLIENT, **{
                "http.request.method": params.method, "url.path": params.url.path,
                "server.address": params.url.host or ""})
            context.span = span
            params.headers.update(_trace_headers(span))

        async def ended(session: Any, context: Any, params: Any) -> None:
            span = getattr(context, "span", None)
            if span is not None:
                span.set_attribute("http.response.status_code", params.response.status)
                if params.response.status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                span.end()

        async def failed(session: Any, context: Any, params: Any) -> None:
            span = getattr(context, "span", None)
            if span is not None:   # the class only: a message may name the URL
                span.set_status(Status(StatusCode.ERROR, type(params.exception).__name__))
                span.end()

        config = aiohttp.TraceConfig()
        config.on_request_start.append(started)
        config.on_request_end.append(ended)
        config.on_request_exception.append(failed)
        return [config]


# The engine's round or tool call open in this task, and the context token it attached.
_ENGINE_SPAN: ContextVar[Any] = ContextVar("gateway_engine_span", default=None)


class EngineTracing(EngineHooks):
    """A span per model round and per tool call, current while it runs (its upstream
    call, the `mcp` package's spans are its children). Tool calls run in tasks of their
    own (`asyncio.gather`), so each has its own current span."""

    def __init__(self, tracing: Tracing):
        self._tracer = tracing.tracer

    def _open(self, name: str, **attributes: Any) -> None:
        span = _child(self._tracer, name, **attributes)
        _ENGINE_SPAN.set((span, otel_context.attach(trace.set_span_in_context(span))))

    def _close(self, ok: bool) -> None:
        opened = _ENGINE_SPAN.get()
        if opened is None:
            return
        _ENGINE_SPAN.set(None)
        span, token = opened
        if not ok:
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        otel_context.detach(token)

    def round_started(self) -> None:
        self._open("engine round")

    def round(self, ok: bool) -> None:
        self._close(ok)

    def tool_started(self, tool_type: str) -> None:
        self._open(f"tool {tool_type.removesuffix('_tool')}", **{"gateway.tool.type": tool_type})

    def tool(self, tool_type: str, ok: bool, seconds: float) -> None:
        self._close(ok)


class WriterTracing:
    """The turn writer's hooks: each queued turn's span context is remembered with its
    waiter; a batch's commit is one span, a root linked to every turn it served."""

    def __init__(self, tracing: Tracing):
        self._tracer = tracing.tracer
        self._turns: dict[asyncio.Future[Any], Any] = {}

    def queued(self, done: asyncio.Future[Any]) -> None:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            self._turns[done] = context

    def writing(self, waiters: list[asyncio.Future[Any]]) -> Any:
        links = [Link(context) for context in (self._turns.pop(done, None) for done in waiters) if context]
        return self._tracer.start_span("db commit turns", context=otel_context.Context(), links=links,
                                       attributes={"db.operation.batch.size": len(waiters)})

    def written(self, span: Any, failed: int) -> None:
        if failed:
            span.set_status(Status(StatusCode.ERROR, f"{failed} turns not recorded"))
        span.end()


class TracedAuthenticator:
    """The configured authenticator, its `authenticate` in a span."""

    def __init__(self, inner: Any, tracing: Tracing):
        self._inner = inner
        self._tracer = tracing.tracer
        self.credential_header = inner.credential_header

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def authenticate(self, headers: Any, query: Any) -> Any:
        # Exceptions are not recorded as such: a refusal's message is the client's to see,
        # not the trace's; the span says only that it failed.
        with self._tracer.start_as_current_span("authenticate", record_exception=False,
                                                 set_status_on_exception=False) as span:
            try:
                return await self._inner.authenticate(headers, query)
            except BaseException as exc:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise

    async def close(self) -> None:
        await self._inner.close()


class TracedQuota:
    """The quota service, its admission and extension in spans; everything else as is."""

    def __init__(self, inner: Any, tracing: Tracing):
        self._inner = inner
        self._tracer = tracing.tracer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def reserve(self, identity: Any, raw: Any) -> Any:
        with self._tracer.start_as_current_span("quota reserve", record_exception=False) as span:
            reservation = await self._inner.reserve(identity, raw)
            if reservation is not None:
                span.set_attribute("gateway.quota.tokens", reservation.tokens)
            return reservation

    async def extend(self, reservation: Any, tokens: int) -> None:
        with self._tracer.start_as_current_span("quota extend", attributes={"gateway.quota.tokens": tokens},
                                                 record_exception=False):
            await self._inner.extend(reservation, tokens)


