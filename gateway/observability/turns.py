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

import logging
import time
from typing import Any, Mapping

from gateway.observability.context import ENDPOINT
from gateway.observability.plain import FOLD_AT
from gateway.observability.metrics import CLIENT_MCP, TURN_OUTCOMES, Metrics
from gateway.schema.errors import ApiError, QuotaExceeded
from gateway.turns.hooks import TurnHooks
from gateway.turns.blocked import BlockedBackend
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.metrics")

# Output items that are server-side tool calls (either backend ran them), by type.
_TOOL_ITEMS = {"mcp_call": "mcp", "file_search_call": "file_search", "web_search_call": "web_search"}

# How a turn ended, from its response's status.
_OUTCOMES = {"completed": "completed", "incomplete": "incomplete", "failed": "failed", "cancelled": "cancelled"}


class _Llm:
    """LCORE's LLM children of one (provider, model, endpoint), bound once."""

    __slots__ = ("calls", "failures", "sent", "received", "succeeded_in", "failed_in")

    def __init__(self, m: Any, labels: tuple[str, str, str]):
        self.calls = m("ls_llm_calls_total").labels(*labels)
        self.failures = m("ls_llm_calls_failures_total").labels(*labels)
        self.sent = m("ls_llm_token_sent_total").labels(*labels)
        self.received = m("ls_llm_token_received_total").labels(*labels)
        inference = m("ls_llm_inference_duration_seconds")
        self.succeeded_in = inference.labels(*labels, "success")
        self.failed_in = inference.labels(*labels, "failure")


class _Kind:
    """The gateway's turn children of one (backend, mode), bound once."""

    __slots__ = ("backend", "mode", "first", "turns", "stream_time")

    def __init__(self, m: Any, backend: str, mode: str):
        self.backend, self.mode = backend, mode
        self.first = m("gateway_time_to_first_event_seconds").labels(backend, mode)
        turns = m("gateway_turns_total")
        self.turns = {outcome: turns.labels(backend, mode, outcome) for outcome in TURN_OUTCOMES}
        self.stream_time = m("gateway_stream_duration_seconds").labels(backend)


class _Observed:
    """What a turn's metrics keep between its hooks (made without an `__init__` call:
    a Python call is most of what recording costs)."""

    __slots__ = ("llm", "kind", "started", "first")


def llm_labels(turn: Turn, endpoint: str) -> tuple[str, str, str]:
    model = turn.model
    provider = model.provider_id or "unknown"
    name = model.id.removeprefix(f"{model.provider_id}/") if model.provider_id else model.id
    return provider, name, endpoint


class TurnMetrics(TurnHooks):
    """`backends`: each backend object → its label (`forward`/`engine`), given by the
    wiring, the one place besides prepare() that knows which is which."""

    shielded = True

    def __init__(self, metrics: Metrics, backends: Mapping[int, str], cluster_limiters: frozenset[str] = frozenset(),
                 mcp_labels: frozenset[str] = frozenset()):
        self._hot = metrics.hot
        self._backends = dict(backends)
        self._cluster = cluster_limiters
        self._mcp_labels = mcp_labels   # the operator's MCP servers: every other label is `client`
        self._m = m = metrics.metric
        self._validation = m("ls_llm_validation_errors_total")
        self._quota_checks = m("ls_quota_checks_total")
        self._admissions = m("gateway_quota_admissions_total")
        self._refusals = m("gateway_quota_refusals_total")
        self._charged = m("gateway_quota_tokens_charged_total")
        self._balance = m("gateway_quota_cluster_balance_tokens")
        self._background = m("gateway_background_responses_total")
        self._running = m("gateway_background_responses_running").labels()   # its one child
        self._tool_calls = m("gateway_tool_calls_total")
        self._mcp_failures = m("gateway_mcp_failures_total")
        self._llm: dict[tuple[str, str, str], _Llm] = {}
        self._kinds: dict[tuple[int, bool, bool], _Kind] = {}
        self._bound: dict[tuple, tuple[_Llm, _Kind]] = {}   # (model, provider, endpoint, backend, modes) → both

    def refused(self, error: ApiError) -> None:
        try:
            endpoint = ENDPOINT.get()
            if isinstance(error, QuotaExceeded):
                self._quota_checks.labels(endpoint, "exceeded").inc()
                if error.limiter:
                    self._refusals.labels(error.limiter).inc()
            elif error.status == 422:
                self._validation.labels(endpoint).inc()
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: refused failed")

    def prepared(self, turn: Turn) -> None:
        try:
            endpoint = ENDPOINT.get()
            if turn.backend.__class__ is BlockedBackend:
                # A question a shield blocked: LCORE's validation error, not a model call
                # (the check's own call is the gateway's, counted with upstream requests).
                self._validation.labels(endpoint).value += 1
                return   # `observed` stays None: no other hook records it
            model = turn.model
            key = (model.id, model.provider_id, endpoint, id(turn.backend), turn.background, turn.stream)
            bound = self._bound.get(key) or self._bind(turn, endpoint, key)
            observed = turn.observed = _Observed.__new__(_Observed)
            (observed.llm, observed.kind), observed.started, observed.first = bound, time.perf_counter(), None
            if turn.background:
                self._running.value += 1
            reservation = turn.reservation
            if reservation is not None:
                self._quota_checks.labels(endpoint, "allowed").value += 1
                for limiter, _ in reservation.pairs:
                    self._admissions.labels(limiter.name).value += 1
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: prepared failed")

    def _bind(self, turn: Turn, endpoint: str, key: tuple) -> tuple[_Llm, _Kind]:
        """The children a kind of turn records into, bound on its first turn (one key,
        one lookup per turn)."""
        model_id, provider, _, backend, background, stream = key
        llm = self._llm.get((model_id, provider, endpoint))
        if llm is None:
            llm = self._llm[model_id, provider, endpoint] = _Llm(self._m, llm_labels(turn, endpoint))
        kind = self._kinds.get((backend, background, stream))
        if kind is None:
            kind = self._kinds[backend, background, stream] = _Kind(
                self._m, self._backends.get(backend, "forward"),
                "background" if background else "stream" if stream else "json")
        bound = self._bound[key] = (llm, kind)
        return bound

    def first_event(self, turn: Turn) -> None:
        try:
            observed = turn.observed
            if observed is None:
                return
            observed.first = now = time.perf_counter()
            kind = observed.kind
            pending = kind.first.pending   # Buckets.observe, inline
            pending.append(now - observed.started)
            if len(pending) >= FOLD_AT:
                kind.first.fold()
            if kind.mode != "json":
                self._hot.streams_open[kind.backend] += 1
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: first_event failed")

    def settled(self, turn: Turn) -> None:
        try:
            quotas = turn.quotas
            if quotas and self._cluster:
                for name, balance in quotas.items():
                    if name in self._cluster:   # the balance every replica shares, as last read here
                        self._balance.labels(name).set(balance)
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: settled failed")

    def streamed(self, turn: Turn, events: int) -> None:
        try:
            observed = turn.observed
            if observed is None:
                return
            kind = observed.kind
            self._hot.stream_events[kind.backend] += events
            if observed.first is not None:
                self._hot.streams_open[kind.backend] -= 1
            kind.stream_time.observe(time.perf_counter() - observed.started)
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: streamed failed")

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        try:
            observed = turn.observed
            if observed is None:
                return
            elapsed = time.perf_counter() - observed.started
            result = turn.result if turn.result.__class__ is dict else None
            if turn.abandoned:
                outcome = "abandoned"
            elif error is not None or result is None:
                outcome = "error"
            else:
                outcome = _OUTCOMES.get(result.get("status"), "error")  # type: ignore[arg-type]
            observed.kind.turns[outcome].value += 1
            llm = observed.llm
            llm.calls.value += 1
            if outcome == "failed" or outcome == "error":
                llm.failures.value += 1
                timer = llm.failed_in
            else:
                timer = llm.succeeded_in
            pending = timer.pending   # Buckets.observe, inline
            pending.append(elapsed)
            if len(pending) >= FOLD_AT:
                timer.fold()
            if turn.background:
                self._running.value -= 1
                self._background.labels(_OUTCOMES.get(outcome, "failed")).value += 1
            charged = 0
            if result is not None:
                output = result.get("output")
                if output.__class__ is list and (len(output) != 1 or output[0].__class__ is not dict
                                                 or output[0].get("type") != "message"):
                    self._tools(output)   # more than the answer: tool calls to count
                usage = result.get("usage") if turn.observed_settled else None
                if usage.__class__ is dict:
                    sent, received = usage.get("input_tokens"), usage.get("output_tokens")  # type: ignore[union-attr]
                    sent = sent if sent.__class__ is int and sent > 0 else 0
                    received = received if received.__class__ is int and received > 0 else 0
                    llm.sent.value += sent
                    llm.received.value += received
                    charged = sent + received
            reservation = turn.reservation
            if reservation is not None:
                if not charged and turn.abandoned:
                    charged = reservation.tokens   # an abandoned turn is charged what it reserved
                if charged:
                    for limiter, _ in reservation.pairs:
                        self._charged.labels(limiter.name).value += charged
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: finished failed")

    def _tools(self, output: Any) -> None:
        """The turn's server-side tool calls and MCP failures, from its output items."""
        if output.__class__ is not list:
            return
        for item in output:
            kind = item.get("type") if item.__class__ is dict else None
            if kind == "message" or kind is None:
                continue
            if kind == "mcp_list_tools":
                if item.get("error"):
                    self._mcp_failures.labels(self._server(item), "list_tools").inc()
                continue
            tool = _TOOL_ITEMS.get(kind)
            if tool is None:
                continue
            failed = bool(item.get("error")) or item.get("status") in ("failed", "incomplete")
            self._tool_calls.labels(tool, "error" if failed else "ok").inc()
            if failed and tool == "mcp":
                self._mcp_failures.labels(self._server(item), "call_tool").inc()

    def _server(self, item: dict[str, Any]) -> str:
        label = item.get("server_label")
        return label if label in self._mcp_labels else CLIENT_MCP
