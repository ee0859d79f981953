"""The per-request observers beside the metrics, built once from the configuration and
the `OTEL_*` variables: the access line (`service.access_log`) and the traces (only when
`otel_env.tracing_requested`: `tracing.py`, and with it OpenTelemetry's SDK, is imported
only then). The wiring (`app.py`) asks this for each hook it attaches."""

from __future__ import annotations

import logging
import os
from typing import Any, Mapping, Sequence

from gateway import outbound
from gateway.config import Configuration
from gateway.engine.hooks import EngineHooks, shielded
from gateway.observability.access_log import AccessLog
from gateway.observability.otel_env import ANONYMIZATION_SECRET, UserHasher, tracing_requested
from gateway.observability.requests import RequestObserver, RequestTurns, RequestUpstream
from gateway.turns.hooks import TurnHooks
from gateway.upstream.client import UpstreamClient, UpstreamHooks

log = logging.getLogger("gateway.observability")


class RequestObservers:
    def __init__(self, config: Configuration, environ: Mapping[str, str] | None = None):
        environ = os.environ if environ is None else environ
        service = config.service
        self.tracing: Any = None
        if tracing_requested(environ):
            from gateway.observability.tracing import RequestTracing, Tracing

            from gateway.observability.tracing import OutboundTracing

            self.tracing = Tracing(environ, config.observability.trace_content)
            # Every outbound client and session made from now on carries the trace.
            outbound.install(OutboundTracing(self.tracing))
        hasher = self.hasher = UserHasher(environ)   # the audit lines' too (app.py, user_ids.py)
        if self.tracing is not None and not hasher.keyed:
            log.warning("tracing: %s is not set: user ids are hashed with a key of this process's own, so "
                        "one user's hash differs between replicas and restarts", ANONYMIZATION_SECRET)
        access = AccessLog(service.access_log_format, service.color_log) if service.access_log else None
        self.active = access is not None or self.tracing is not None
        self.middleware = RequestObserver(access, RequestTracing(self.tracing) if self.tracing else None,
                                          service.root_path, hasher) if self.active else None
        self._trace_content = config.observability.trace_content and self.tracing is not None

    def turn_hooks(self) -> list[TurnHooks]:
        return [RequestTurns(self._trace_content)] if self.active else []

    def upstream(self, client: UpstreamClient, metrics: UpstreamHooks | None) -> None:
        """The client's hooks: the metrics', the request record's, the trace's."""
        hooks: list[UpstreamHooks] = [metrics] if metrics is not None else []
        if self.active:
            hooks.append(RequestUpstream())
        if self.tracing is not None:
            from gateway.observability.tracing import UpstreamTracing

            traced = UpstreamTracing(self.tracing, client.base_url)
            client.outgoing = traced.outgoing
            hooks.append(traced)
        client.hooks = hooks[0] if len(hooks) == 1 else UpstreamFanout(hooks) if hooks else None

    def engine(self, metrics: EngineHooks | None) -> EngineHooks | None:
        if self.tracing is None:
            return metrics
        from gateway.observability.tracing import EngineTracing

        traced = EngineTracing(self.tracing)
        return traced if metrics is None else EngineFanout([metrics, traced])

    def writer(self) -> Any:
        if self.tracing is None:
            return None
        from gateway.observability.tracing import WriterTracing

        return WriterTracing(self.tracing)

    def authenticator(self, inner: Any) -> Any:
        if self.tracing is None:
            return inner
        from gateway.observability.tracing import TracedAuthenticator

        return TracedAuthenticator(inner, self.tracing)

    def quota(self, inner: Any) -> Any:
        if self.tracing is None:
            return inner
        from gateway.observability.tracing import TracedQuota

        return TracedQuota(inner, self.tracing)

    async def close(self) -> None:
        if self.tracing is not None:
            outbound.install(None)
            await self.tracing.close()


class UpstreamFanout(UpstreamHooks):
    """Several observers of the upstream client, in order (each catches nothing: the
    client's hooks are its own code's, which never raise)."""

    def __init__(self, hooks: Sequence[UpstreamHooks]):
        self._hooks = tuple(hooks)

    def answered(self, path: str, status: int, seconds: float) -> None:
        for hooks in self._hooks:
            hooks.answered(path, status, seconds)

    def failed(self, path: str, outcome: str, seconds: float) -> None:
        for hooks in self._hooks:
            hooks.failed(path, outcome, seconds)

    def retried(self, path: str, outcome: str) -> None:
        for hooks in self._hooks:
            hooks.retried(path, outcome)


class EngineFanout(EngineHooks):
    """Several observers of the engine's loop, each shielded from the others."""

    def __init__(self, hooks: Sequence[EngineHooks]):
        self._hooks = tuple(hooks)

    def round_started(self) -> None:
        for hooks in self._hooks:
            shielded(hooks, "round_started")

    def round(self, ok: bool) -> None:
        for hooks in self._hooks:
            shielded(hooks, "round", ok)

    def tool_started(self, tool_type: str) -> None:
        for hooks in self._hooks:
            shielded(hooks, "tool_started", tool_type)

    def tool(self, tool_type: str, ok: bool, seconds: float) -> None:
        for hooks in self._hooks:
            shielded(hooks, "tool", tool_type, ok, seconds)
