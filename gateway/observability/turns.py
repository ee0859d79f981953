"""What a turn records, from the runner's hooks (`gateway/turns/hooks.py`), never from
the business code: LCORE's LLM metrics, quota checks, and the gateway's turn, stream
and quota metrics. Each is recorded once per turn, on every endpoint and transport
(JSON, SSE, background), at its `finished` moment; a stream's events are counted once,
at its end.

How turns count (docs/operating.md, "Metrics"):
- `ls_llm_calls_total`: one per turn that reached its backend, however many model
  rounds the local engine ran for it (those are `gateway_engine_rounds_total`); the
  gateway's own model calls (guardrail moderation, topic summaries) are not turns.
- `ls_llm_calls_failures_total`: a turn whose backend failed it (an upstream error,
  a `failed` response, a broken stream); a client that left is not a failure.
- tokens: the usage of a settled turn only; a request refused before it ran (4xx)
  never reaches these hooks.
- `provider`/`model`: the resolved model's provider and its id without the
  `<provider>/` prefix; an id without that prefix is kept whole (provider from the
  catalog, `unknown` when the upstream names none).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from gateway.observability.context import ENDPOINT
from gateway.observability.metrics import CLIENT_MCP, Metrics
from gateway.schema.errors import ApiError, QuotaExceeded
from gateway.turns.hooks import TurnHooks
from gateway.turns.turn import Turn

# Output items that are server-side tool calls (either backend ran them), by type.
_TOOL_ITEMS = {"mcp_call": "mcp", "file_search_call": "file_search", "web_search_call": "web_search"}

# How a turn ended, from its response's status.
_OUTCOMES = {"completed": "completed", "incomplete": "incomplete", "failed": "failed", "cancelled": "cancelled"}


class _Observed:
    __slots__ = ("endpoint", "backend", "mode", "labels", "started", "first")

    def __init__(self, endpoint: str, backend: str, mode: str, labels: tuple[str, str, str], started: float):
        self.endpoint = endpoint
        self.backend = backend
        self.mode = mode
        self.labels = labels            # (provider, model, endpoint): LCORE's LLM labels
        self.started = started
        self.first: float | None = None


def llm_labels(turn: Turn, endpoint: str) -> tuple[str, str, str]:
    model = turn.model
    provider = model.provider_id or "unknown"
    name = model.id.removeprefix(f"{model.provider_id}/") if model.provider_id else model.id
    return provider, name, endpoint


class TurnMetrics(TurnHooks):
    """`backends`: each backend object → its label (`forward`/`engine`), given by the
    wiring, the one place besides prepare() that knows which is which."""

    def __init__(self, metrics: Metrics, backends: Mapping[int, str], cluster_limiters: frozenset[str] = frozenset(),
                 mcp_labels: frozenset[str] = frozenset()):
        self._hot = metrics.hot
        self._backends = dict(backends)
        self._cluster = cluster_limiters
        self._mcp_labels = mcp_labels   # the operator's MCP servers: every other label is `client`
        m = metrics.metric
        self._calls = m("ls_llm_calls_total")
        self._failures = m("ls_llm_calls_failures_total")
        self._validation = m("ls_llm_validation_errors_total")
        self._sent = m("ls_llm_token_sent_total")
        self._received = m("ls_llm_token_received_total")
        self._inference = m("ls_llm_inference_duration_seconds")
        self._quota_checks = m("ls_quota_checks_total")
        self._turns = m("gateway_turns_total")
        self._first = m("gateway_time_to_first_event_seconds")
        self._stream = m("gateway_stream_duration_seconds")
        self._admissions = m("gateway_quota_admissions_total")
        self._refusals = m("gateway_quota_refusals_total")
        self._charged = m("gateway_quota_tokens_charged_total")
        self._balance = m("gateway_quota_cluster_balance_tokens")
        self._background = m("gateway_background_responses_total")
        self._running = m("gateway_background_responses_running")
        self._tool_calls = m("gateway_tool_calls_total")
        self._mcp_failures = m("gateway_mcp_failures_total")
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _child(self, metric: Any, *labels: str) -> Any:
        """A label child, bound once and kept (labels() hashes and locks on every call)."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def refused(self, error: ApiError) -> None:
        endpoint = ENDPOINT.get()
        if isinstance(error, QuotaExceeded):
            self._child(self._quota_checks, endpoint, "exceeded").inc()
            if error.limiter:
                self._child(self._refusals, error.limiter).inc()
        elif error.status == 422:
            self._child(self._validation, endpoint).inc()

    def prepared(self, turn: Turn) -> None:
        endpoint = ENDPOINT.get()
        mode = "background" if turn.background else "stream" if turn.stream else "json"
        turn.observed = _Observed(endpoint, self._backends.get(id(turn.backend), "forward"), mode,
                                  llm_labels(turn, endpoint), time.perf_counter())
        if turn.background:
            self._running.inc()
        reservation = turn.reservation
        if reservation is not None:
            self._child(self._quota_checks, endpoint, "allowed").inc()
            for limiter, _ in reservation.pairs:
                self._child(self._admissions, limiter.name).inc()

    def first_event(self, turn: Turn) -> None:
        observed = turn.observed
        if observed is None:
            return
        observed.first = now = time.perf_counter()
        self._child(self._first, observed.backend, observed.mode).observe(now - observed.started)
        if observed.mode != "json":
            self._hot.streams_open[observed.backend] += 1

    def settled(self, turn: Turn) -> None:
        quotas = turn.quotas
        if quotas and self._cluster:
            for name, balance in quotas.items():
                if name in self._cluster:   # the balance every replica shares, as last read here
                    self._child(self._balance, name).set(balance)

    def streamed(self, turn: Turn, events: int) -> None:
        observed = turn.observed
        if observed is None:
            return
        self._hot.stream_events[observed.backend] += events
        if observed.first is not None:
            self._hot.streams_open[observed.backend] -= 1
        self._child(self._stream, observed.backend).observe(time.perf_counter() - observed.started)

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        observed = turn.observed
        if observed is None:
            return
        result = turn.result if isinstance(turn.result, dict) else None
        if turn.abandoned:
            outcome = "abandoned"
        elif error is not None:
            outcome = "error"
        else:
            outcome = _OUTCOMES.get(str((result or {}).get("status")), "error")
        self._child(self._turns, observed.backend, observed.mode, outcome).inc()
        if turn.background:
            self._running.dec()
            self._child(self._background, _OUTCOMES.get(outcome, "failed")).inc()
        labels = observed.labels
        self._child(self._calls, *labels).inc()
        failed = outcome in ("failed", "error")
        if failed:
            self._child(self._failures, *labels).inc()
        self._child(self._inference, *labels, "failure" if failed else "success").observe(
            time.perf_counter() - observed.started)
        if result is not None:
            self._tools(result.get("output"))
        usage = result.get("usage") if result is not None and turn.observed_settled else None
        if isinstance(usage, dict):
            sent, received = _tokens(usage, "input_tokens"), _tokens(usage, "output_tokens")
            self._child(self._sent, *labels).inc(sent)
            self._child(self._received, *labels).inc(received)
            charged = sent + received
        else:
            # An abandoned turn is charged what it reserved (turns/settle.py).
            charged = turn.reservation.tokens if turn.abandoned and turn.reservation is not None else 0
        if charged and turn.reservation is not None:
            for limiter, _ in turn.reservation.pairs:
                self._child(self._charged, limiter.name).inc(charged)


    def _tools(self, output: Any) -> None:
        """The turn's server-side tool calls and MCP failures, from its output items."""
        if not isinstance(output, list):
            return
        for item in output:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "mcp_list_tools":
                if item.get("error"):
                    self._child(self._mcp_failures, self._server(item), "list_tools").inc()
                continue
            tool = _TOOL_ITEMS.get(kind)
            if tool is None:
                continue
            failed = bool(item.get("error")) or item.get("status") in ("failed", "incomplete")
            self._child(self._tool_calls, tool, "error" if failed else "ok").inc()
            if failed and tool == "mcp":
                self._child(self._mcp_failures, self._server(item), "call_tool").inc()

    def _server(self, item: dict[str, Any]) -> str:
        label = item.get("server_label")
        return label if label in self._mcp_labels else CLIENT_MCP


def _tokens(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
