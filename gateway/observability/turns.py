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
from time import perf_counter
from typing import Any, Mapping

from gateway.observability.plain import Counted
from gateway.request_scope import REQUEST
from gateway.observability.metrics import CLIENT_MCP, TURN_OUTCOMES, Metrics
from gateway.schema.errors import ApiError, QuotaExceeded
from gateway.turns.hooks import TurnHooks
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.metrics")

# Output items that are server-side tool calls (either backend ran them), by type.
_TOOL_ITEMS = {"mcp_call": "mcp", "file_search_call": "file_search", "web_search_call": "web_search"}

# Children kept by `prepared`'s key before it starts again (the upstream names the models).
_MAX_BOUND = 4096

# How a turn ended, from its response's status.
_OUTCOMES = {"completed": "completed", "incomplete": "incomplete", "failed": "failed", "cancelled": "cancelled"}


class _Llm:
    """LCORE's LLM children of one (provider, model, endpoint), bound once. Every turn
    that reaches `finished` is observed once in the inference histogram, as a success
    or a failure: its calls and failures counters are those observations' counts
    (`plain.Counted`), read at scrape rather than added to per turn."""

    __slots__ = ("provider", "sent", "received", "succeeded_in", "failed_in")

    def __init__(self, m: Any, provider: str | None, labels: tuple[str, str, str]):
        self.provider = provider   # the catalog's, to notice a model that moved to another
        self.sent = m("ls_llm_token_sent_total").labels(*labels)
        self.received = m("ls_llm_token_received_total").labels(*labels)
        inference = m("ls_llm_inference_duration_seconds")
        self.succeeded_in = inference.labels(*labels, "success")
        self.failed_in = inference.labels(*labels, "failure")
        m("ls_llm_calls_total").derive(labels, Counted(self.succeeded_in, self.failed_in))
        m("ls_llm_calls_failures_total").derive(labels, Counted(self.failed_in))


class _Kind:
    """The gateway's turn children of one (backend, mode), bound once."""

    __slots__ = ("backend", "streaming", "first", "turns", "stream_time")

    def __init__(self, m: Any, backend: str, mode: str):
        self.backend, self.streaming = backend, mode != "json"
        self.first = m("gateway_time_to_first_event_seconds").labels(backend, mode)
        turns = m("gateway_turns_total")
        self.turns = {outcome: turns.labels(backend, mode, outcome) for outcome in TURN_OUTCOMES}
        self.stream_time = m("gateway_stream_duration_seconds").labels(backend)


class _Bound:
    """What a turn of one (endpoint, model, backend, mode) records into, found once per
    turn (`turn.observed`): its LLM and kind children, and per outcome the pair a
    finished turn bumps (its turn counter, and the inference histogram it is observed
    in: a success or a failure)."""

    __slots__ = ("provider", "llm", "kind", "outcomes")

    def __init__(self, llm: _Llm, kind: _Kind):
        self.provider, self.llm, self.kind = llm.provider, llm, kind
        self.outcomes = {outcome: (kind.turns[outcome],
                                   llm.failed_in if outcome in ("failed", "error") else llm.succeeded_in)
                         for outcome in TURN_OUTCOMES}


def llm_labels(turn: Turn, endpoint: str) -> tuple[str, str, str]:
    model = turn.plan.model
    provider = model.provider_id or "unknown"
    name = model.id.removeprefix(f"{model.provider_id}/") if model.provider_id else model.id
    return provider, name, endpoint


def _key(turn: Turn) -> tuple[str, str, Any, int]:
    """A turn's children are bound by (endpoint, model id, backend, mode: JSON 0, stream 1,
    background 2)."""
    plan = turn.plan
    return REQUEST.get()[1], plan.model.id, plan.backend, 2 if plan.background else plan.stream


class TurnMetrics(TurnHooks):
    """`backends`: each backend object → its label (`forward`/`engine`), given by the
    wiring, the one place besides prepare() that knows which is which."""

    shielded = True

    def __init__(self, metrics: Metrics, backends: Mapping[int, str], mcp_labels: frozenset[str] = frozenset()):
        self._hot = metrics.hot
        self._backends = dict(backends)
        self._mcp_labels = mcp_labels   # the operator's MCP servers: every other label is `client`
        self._m = m = metrics.metric
        self._validation = m("ls_llm_validation_errors_total")
        self._quota_checks = m("ls_quota_checks_total")
        self._admissions = m("gateway_quota_admissions_total")
        self._refusals = m("gateway_quota_refusals_total")
        self._charged = m("gateway_quota_tokens_charged_total")
        self._background = m("gateway_background_responses_total")
        self._tool_calls = m("gateway_tool_calls_total")
        self._mcp_failures = m("gateway_mcp_failures_total")
        self._llm: dict[tuple[str, str, str], _Llm] = {}            # by labels
        self._bound: dict[tuple[str, str, Any, int], _Bound] = {}   # (endpoint, model id, backend, mode) → children
        self._kinds: dict[Any, tuple[_Kind, _Kind, _Kind]] = {}    # backend → its json, stream, background

    def refused(self, error: ApiError) -> None:
        try:
            endpoint = REQUEST.get()[1]
            if isinstance(error, QuotaExceeded):
                self._quota_checks.labels(endpoint, "exceeded").inc()
                if error.limiter:
                    self._refusals.labels(error.limiter).inc()
            elif error.status == 422:
                self._validation.labels(endpoint).inc()
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: refused failed")

    # No `prepared`: a turn is timed from `turn.plan.clock` (when prepare() made it) and its
    # children are looked up at its first event, so the moment costs nothing here (the
    # runner calls every moment on every turn: bench/README.md, "Metrics").

    def first_event(self, turn: Turn) -> None:
        try:
            now = turn.observed_at = perf_counter()   # a JSON turn's answer: its inference time ends here
            plan = turn.plan
            model = plan.model
            # One lookup (subscripts, not `.get` calls: this runs on every turn).
            key = _key(turn)
            bound: _Bound | None
            try:
                bound = self._bound[key]
                if bound.provider != model.provider_id:
                    raise KeyError(key)
            except KeyError:
                bound = self._bind(turn, key)
                if bound is None:   # a question a shield blocked
                    return
            turn.observed = bound   # what `finished` reads (`observed_at`: a stream's moves to its end)
            kind = bound.kind
            kind.first.pending.append(now - plan.clock)   # Buckets.observe, inline (folded every second)
            if kind.streaming:
                self._hot.streams_open[kind.backend] += 1   # `finished` closes it
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: first_event failed")

    def _unopened(self, turn: Turn) -> _Bound | None:
        """A turn that ended before its first event: its children, ended now (None: a
        question a shield blocked, or one already counted as such)."""
        key = _key(turn)
        bound = self._bound.get(key)
        if bound is None or bound.provider != turn.plan.model.provider_id:
            bound = self._bind(turn, key)
        if bound is not None:
            turn.observed, turn.observed_at = bound, perf_counter()
        return bound

    def _bind(self, turn: Turn, key: tuple[str, str, Any, int]) -> _Bound | None:
        """A turn's children by (endpoint, model id, backend, mode), bound on its first
        turn (and again if the catalog moves the model to another provider); None for a
        question a shield blocked (its backend is made per turn, so never kept), counted
        once as LCORE's validation error, not a model call (the check's own call is the
        gateway's, counted with upstream requests)."""
        endpoint, _, backend, mode = key
        if turn.plan.blocked is not None:
            if turn.observed is None:
                turn.observed = ()   # counted: no other hook records it
                self._validation.labels(endpoint).value += 1
            return None
        kinds = self._kinds.get(backend) or self._bind_kinds(backend)
        bound = _Bound(self._bind_llm(turn, endpoint), kinds[mode])
        if len(self._bound) >= _MAX_BOUND:   # model ids are the upstream's: bounded, but kept so
            self._bound.clear()
        self._bound[key] = bound
        return bound

    def _bind_llm(self, turn: Turn, endpoint: str) -> _Llm:
        """The LLM children of a model on an endpoint, bound on its first turn (and again
        if the catalog moves the model to another provider)."""
        labels = llm_labels(turn, endpoint)
        llm = self._llm.get(labels)
        if llm is None:
            llm = self._llm[labels] = _Llm(self._m, turn.plan.model.provider_id, labels)
        return llm

    def _bind_kinds(self, backend: Any) -> tuple[_Kind, _Kind, _Kind]:
        label = self._backends.get(id(backend), "forward")
        kinds = self._kinds[backend] = (_Kind(self._m, label, "json"), _Kind(self._m, label, "stream"),
                                        _Kind(self._m, label, "background"))
        return kinds

    # No `streamed` either: a stream's end is recorded by `finished`, which the runner
    # calls right after it, with the events its sink was sent (`turn.events`).

    def finished(self, turn: Turn, error: BaseException | None) -> None:
        try:
            bound = turn.observed
            opened = True
            if not bound:
                # It ended before its first event, or was a question a shield blocked
                # (an empty `observed`).
                bound = self._unopened(turn) if bound is None else None
                if bound is None:
                    return
                opened = False
            kind = bound.kind
            plan, settled = turn.plan, turn.outcome
            if kind.streaming:   # a stream's answer ended now
                ended = turn.observed_at = perf_counter()
                backend = kind.backend
                if opened:
                    self._hot.streams_open[backend] -= 1
                self._hot.stream_events[backend] += turn.events
                kind.stream_time.pending.append(ended - plan.clock)   # Buckets.observe, inline
            result = settled.result
            if result.__class__ is not dict:
                result = None
            if settled.abandoned:
                outcome = "abandoned"
            elif error is not None or result is None:
                outcome = "error"
            else:
                try:
                    outcome = _OUTCOMES[result["status"]]
                except (KeyError, TypeError):
                    outcome = "error"
            # Its turn counter, and one inference observation (a success or a failure:
            # also the call and, if so, the failure). Inference time: to the JSON answer
            # (`first_event`) or the stream's end, else (it failed before either) to when
            # it was seen to end.
            counted, inference = bound.outcomes[outcome]
            counted.value += 1
            inference.pending.append(turn.observed_at - plan.clock)
            if plan.background:
                self._background.labels(_OUTCOMES.get(outcome, "failed")).value += 1
            charged = 0
            if result is not None:
                try:
                    output = result["output"]
                    tools = output.__class__ is list and (len(output) != 1 or output[0]["type"] != "message")
                except (KeyError, TypeError):   # no output, or an odd first item
                    output, tools = result.get("output"), True
                if tools:
                    self._tools(output)   # more than the answer: tool calls to count
                if turn.observed_settled:
                    try:   # subscripts, not `.get` calls: the common usage costs no call
                        usage = result["usage"]
                        sent, received = usage["input_tokens"], usage["output_tokens"]
                    except (KeyError, TypeError):
                        sent, received = _odd_usage(result)
                    sent = sent if sent.__class__ is int and sent > 0 else 0
                    received = received if received.__class__ is int and received > 0 else 0
                    llm = bound.llm
                    llm.sent.value += sent
                    llm.received.value += received
                    charged = sent + received
            reservation = plan.reservation
            if reservation is not None:
                self._admitted(reservation, charged if charged or not (settled.abandoned or settled.unreported)
                               else reservation.tokens)
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: finished failed")

    def _admitted(self, reservation: Any, charged: int) -> None:
        """A turn quota admitted (counted when it ends, with what it was charged: an
        abandoned turn is charged what it reserved)."""
        self._quota_checks.labels(REQUEST.get()[1], "allowed").value += 1
        for limiter, _ in reservation.pairs:
            name = limiter.name
            self._admissions.labels(name).value += 1
            if charged:
                self._charged.labels(name).value += charged

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


def _odd_usage(result: dict[str, Any]) -> tuple[Any, Any]:
    """A result's usage when it lacks one of its counts, or is no object."""
    usage = result.get("usage")
    if usage.__class__ is not dict:
        return 0, 0
    return usage.get("input_tokens"), usage.get("output_tokens")


class ClusterBalances(TurnHooks):
    """The balance every replica shares, per cluster limiter, as this replica last read
    it when a turn settled (registered only when the quota has cluster limiters, so the
    `settled` moment costs nothing otherwise)."""

    shielded = True

    def __init__(self, metrics: Metrics, cluster_limiters: frozenset[str]):
        self._cluster = cluster_limiters
        self._balance = metrics.metric("gateway_quota_cluster_balance_tokens")

    def settled(self, turn: Turn) -> None:
        try:
            quotas = turn.outcome.quotas
            if quotas:
                for name, balance in quotas.items():
                    if name in self._cluster:
                        self._balance.labels(name).set(balance)
        except Exception:   # shielded (TurnHooks.shielded): a metric never fails a turn
            log.exception("turn metrics: settled failed")
