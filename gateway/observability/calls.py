"""What the gateway's calls out record, from their hooks: upstream requests (latency,
errors, retries by operation and outcome; `gateway/upstream/client.py` UpstreamHooks)
and the local engine's model rounds and tool calls (`gateway/engine/hooks.py`)."""

from __future__ import annotations

from typing import Any

from gateway.engine.hooks import EngineHooks
from gateway.observability.metrics import OTHER, TOOL_TYPES, Metrics
from gateway.upstream.client import UpstreamHooks

# An upstream path → its operation label (bounded: ids in paths never become labels).
_OPERATIONS = (("/v1/chat/completions", "chat_completions"), ("/v1/responses", "responses"),
               ("/v1/conversations", "conversations"), ("/v1/models", "models"),
               ("/v1/moderations", "moderations"), ("/v1/vector_stores", "vector_stores"),
               ("/v1/embeddings", "embeddings"), ("/v1/inspect", "inspect"), ("/v1/files", "files"))


def operation(path: str) -> str:
    for prefix, name in _OPERATIONS:
        if path.startswith(prefix):
            return name
    return OTHER


def _status_outcome(status: int) -> str:
    return "ok" if status < 400 else "client_error" if status < 500 else "server_error"


class UpstreamMetrics(UpstreamHooks):
    def __init__(self, metrics: Metrics):
        self._latency = metrics.metric("gateway_upstream_request_duration_seconds")
        self._errors = metrics.metric("gateway_upstream_errors_total")
        self._retries = metrics.metric("gateway_upstream_retries_total")
        self._children: dict[tuple[Any, str, str], Any] = {}
        self._answers: dict[str, dict[int, tuple[Any, Any]]] = {}   # path → status → (latency, errors)

    def _child(self, metric: Any, path: str, outcome: str) -> Any:
        key = (metric, path, outcome)
        child = self._children.get(key)
        if child is None:
            # Keyed by the raw path for speed, labelled by its operation; paths with ids
            # (rare: reads of stored responses) are not kept.
            child = metric.labels(operation(path), outcome)
            if len(self._children) < 256:
                self._children[key] = child
        return child

    def answered(self, path: str, status: int, seconds: float) -> None:
        # The common answer (a known path, 200) costs this one call: its children are
        # kept by path then status (no key to build, subscripts rather than `.get`
        # calls), the histogram observed inline.
        try:
            latency, errors = self._answers[path][status]
        except KeyError:
            latency, errors = self._bind_answer(path, status)
        latency.pending.append(seconds)   # Buckets.observe, inline (folded every second)
        if errors is not None:
            errors.value += 1

    def _bind_answer(self, path: str, status: int) -> tuple[Any, Any]:
        outcome = _status_outcome(status)
        bound = (self._child(self._latency, path, outcome),
                 self._child(self._errors, path, outcome) if outcome != "ok" else None)
        if len(self._answers) < 256:   # fixed paths, not every id
            self._answers.setdefault(path, {})[status] = bound
        return bound

    def failed(self, path: str, outcome: str, seconds: float) -> None:
        self._child(self._latency, path, outcome).observe(seconds)
        self._child(self._errors, path, outcome).inc()

    def retried(self, path: str, outcome: str) -> None:
        self._child(self._retries, path, outcome).inc()


class EngineMetrics(EngineHooks):
    def __init__(self, metrics: Metrics):
        rounds = metrics.metric("gateway_engine_rounds_total")
        self._rounds = {True: rounds.labels("ok"), False: rounds.labels("error")}
        duration = metrics.metric("gateway_tool_duration_seconds")
        self._tools = {(kind, ok): duration.labels(kind, "ok" if ok else "error")
                       for kind in TOOL_TYPES for ok in (True, False)}

    def round(self, ok: bool) -> None:
        self._rounds[ok].inc()

    def tool(self, tool_type: str, ok: bool, seconds: float) -> None:
        # The engine's plan names its server-side tools `mcp_tool`, `web_search_tool`,
        # `file_search`: the label is the tool's kind as the response shows it.
        kind = tool_type.removesuffix("_tool")
        (self._tools.get((kind, ok)) or self._tools[OTHER, ok]).observe(seconds)
