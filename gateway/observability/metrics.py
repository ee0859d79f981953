"""Every metric `/metrics` exposes: name, type, labels, buckets and help, in one table.

Two families:

- LCORE's (`ls_…`): the names, labels and buckets of lightspeed-stack, so alerts written
  against LCORE keep working; recorded exactly once per turn where LCORE double-counts
  or never records (docs/operating.md, "Metrics").
- the gateway's own (`gateway_…`): units in names, bounded label values only (never a
  user id, conversation id or raw path; unknown model names and clients' own MCP server
  labels collapse to `other`/`client`), buckets fit for millisecond latencies.

Each application builds its own set in its own `CollectorRegistry` (`Metrics`), never
the process-global one, so two apps in one process (tests) never share a series. Every
metric is kept as plain numbers made samples at scrape time (`plain.py`); the hottest
(in-flight requests, open streams, events relayed, REST calls) are bare integers in
`HotCounters`: the request path pays an integer add, not a metric call. A worker of a
group (`service.workers`) copies these numbers to files the group's scrapes merge
(`group.py`), once a second: its request path is the same.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Iterable

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.observability.exposition import Exposition
from gateway.observability.group import GroupExposition, from_environment
from gateway.observability.plain import Family, PlainCollector

log = logging.getLogger("gateway.metrics")

# How often pending histogram observations are folded into their buckets (`Metrics.folding`).
FOLD_EVERY = 1.0

# No `_created` series: they double the output and no dashboard reads them.
disable_created_metrics()

# LCORE's buckets for both its histograms (seconds).
LCORE_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
# The gateway's latencies: a relayed first event or a database commit takes milliseconds.
MS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Whole turns and streams: seconds to minutes.
TURN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)

# Bounded value sets (docs/operating.md lists them).
OTHER = "other"                 # an unknown model, path or tool type
CLIENT_MCP = "client"           # every MCP server a client names itself (never its label)
AUTH_RESULTS = ("success", "failure", "skipped")
# Why an authentication failed: the status it answers (401 no/invalid credential, 403
# refused identity, 503 identity provider unreachable) as a word.
AUTH_REASONS = ("ok", "no_credential", "invalid_credential", "forbidden", "provider_unavailable", "probe")
AUTHZ_RESULTS = ("allowed", "denied")
QUOTA_RESULTS = ("allowed", "exceeded")
LLM_RESULTS = ("success", "failure")
BACKENDS = ("forward", "engine")
MODES = ("json", "stream", "background")
TURN_OUTCOMES = ("completed", "incomplete", "failed", "cancelled", "abandoned", "error")
UPSTREAM_OUTCOMES = ("ok", "client_error", "server_error", "connect_error", "timeout")
TOOL_TYPES = ("mcp", "file_search", "web_search", OTHER)
TOOL_OUTCOMES = ("ok", "error")
MCP_OPERATIONS = ("list_tools", "call_tool")
BACKGROUND_STATES = ("queued", "in_progress", "completed", "incomplete", "failed", "cancelled")
CAPABILITY_APIS = ("unknown", "responses", "chat_completions")
CAPABILITY_CONVERSATIONS = ("unknown", "upstream", "gateway")
POOL_STATES = ("in_use", "idle", "max")


@dataclass(frozen=True)
class Definition:
    name: str            # as exposed (a counter's `_total` included)
    kind: str            # counter | gauge | histogram
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] | None = None
    # A gauge's value across a group of workers (`observability/group.py`, `GAUGE_MODES`):
    # `livesum`, `livemax`, or `worker` (each live worker's series, labelled by worker).
    across_workers: str | None = None


def _d(name: str, kind: str, labels: tuple[str, ...], help: str, buckets: tuple[float, ...] | None = None,
       across_workers: str | None = None) -> Definition:
    return Definition(name, kind, labels, help, buckets, across_workers)


DEFINITIONS: tuple[Definition, ...] = (
    # LCORE's names (src/metrics/__init__.py).
    _d("ls_rest_api_calls_total", "counter", ("path", "status_code"),
       "REST API calls by route template and status code (not /metrics itself)"),
    _d("ls_response_duration_seconds", "histogram", ("path",),
       "Response duration by route template (WebSocket upgrades excluded)", LCORE_BUCKETS),
    _d("ls_provider_model_configuration", "gauge", ("provider", "model"),
       "1 for the configured default provider/model, 0 for every other LLM the upstream lists",
       across_workers="livemax"),
    _d("ls_llm_calls_total", "counter", ("provider", "model", "endpoint"),
       "Turns that reached the model, once per turn however many model rounds it took"),
    _d("ls_llm_calls_failures_total", "counter", ("provider", "model", "endpoint"),
       "Turns whose model call failed (upstream error, failed response, broken stream)"),
    _d("ls_llm_validation_errors_total", "counter", ("endpoint",),
       "Turn requests refused as invalid (422) before reaching the model, or blocked by a shield"),
    _d("ls_llm_token_sent_total", "counter", ("provider", "model", "endpoint"),
       "Input tokens the upstream reported, per turn"),
    _d("ls_llm_token_received_total", "counter", ("provider", "model", "endpoint"),
       "Output tokens the upstream reported, per turn"),
    _d("ls_llm_inference_duration_seconds", "histogram", ("provider", "model", "endpoint", "result"),
       "Time from a turn's start to its model's complete answer (the JSON answer, or the stream's end)", LCORE_BUCKETS),
    _d("ls_started_in_degraded_mode", "gauge", (),
       "1 if the gateway started without its upstream (llama_stack.allow_degraded_mode)", across_workers="livemax"),
    # LCORE's unmerged metrics work: authentication, authorization and quota facts.
    _d("ls_auth_attempts_total", "counter", ("auth_module", "result", "reason"),
       "Authentication attempts by module, result and reason"),
    _d("ls_authorization_checks_total", "counter", ("action", "result"),
       "Authorization checks by action and result"),
    _d("ls_quota_checks_total", "counter", ("endpoint", "result"),
       "Quota admission checks by endpoint and result"),
    # The gateway's own.
    _d("gateway_http_requests_in_flight", "gauge", (), "HTTP requests being handled by this process",
       across_workers="livesum"),
    _d("gateway_streams_open", "gauge", ("backend",), "Streamed turns open in this process", across_workers="livesum"),
    _d("gateway_turns_total", "counter", ("backend", "mode", "outcome"), "Turns run, by how they ended"),
    _d("gateway_time_to_first_event_seconds", "histogram", ("backend", "mode"),
       "From a turn's start to its backend's first event (streams) or JSON answer", MS_BUCKETS),
    _d("gateway_stream_duration_seconds", "histogram", ("backend",),
       "From a streamed turn's start to its end", TURN_BUCKETS),
    _d("gateway_stream_events_total", "counter", ("backend",),
       "Events relayed to clients on streams (added once per stream, at its end)"),
    _d("gateway_upstream_request_duration_seconds", "histogram", ("operation", "outcome"),
       "Upstream request latency (to the response headers) by operation and outcome", MS_BUCKETS),
    _d("gateway_upstream_errors_total", "counter", ("operation", "outcome"),
       "Upstream requests that failed, by operation and outcome"),
    _d("gateway_upstream_retries_total", "counter", ("operation", "outcome"),
       "Upstream requests retried, by operation and the outcome that caused the retry"),
    _d("gateway_upstream_capability_mode", "gauge", ("api", "conversations"),
       "1 for the upstream API and conversation keeper turns use (unknown until probed)", across_workers="worker"),
    _d("gateway_upstream_circuit_state", "gauge", ("upstream",),
       "The upstream's circuit breaker: 0 closed, 1 half-open (probing), 2 open (turns refused)",
       across_workers="worker"),
    _d("gateway_quota_admissions_total", "counter", ("limiter",), "Turns admitted by each quota limiter"),
    _d("gateway_quota_refusals_total", "counter", ("limiter",), "Turns refused (429) by each quota limiter"),
    _d("gateway_quota_tokens_charged_total", "counter", ("limiter",), "Tokens charged to each quota limiter"),
    _d("gateway_quota_cluster_balance_tokens", "gauge", ("limiter",),
       "A cluster limiter's balance as this replica last read it (same value on every replica: take the max)",
       across_workers="livemax"),
    _d("gateway_engine_rounds_total", "counter", ("outcome",),
       "Local-engine model rounds (Chat Completions calls), by outcome"),
    _d("gateway_tool_calls_total", "counter", ("tool_type", "outcome"),
       "Server-side tool calls by tool type and outcome"),
    _d("gateway_tool_duration_seconds", "histogram", ("tool_type", "outcome"),
       "Server-side tool call latency", MS_BUCKETS),
    _d("gateway_mcp_failures_total", "counter", ("server", "operation"),
       "MCP tools/list and tools/call failures by operator server label (clients' own: `client`)"),
    _d("gateway_db_operation_duration_seconds", "histogram", ("operation",),
       "Database operation latency", MS_BUCKETS),
    _d("gateway_db_pool_connections", "gauge", ("state",), "Database pool connections (PostgreSQL)",
       across_workers="livesum"),
    _d("gateway_background_responses_total", "counter", ("state",),
       "Background responses this process ran, by final state"),
    _d("gateway_background_responses_running", "gauge", (), "Background responses running in this process",
       across_workers="livesum"),
    _d("gateway_upstream_connections", "gauge", ("state",),
       "Connections to the Llama Stack upstream, by state (busy: an exchange on it; idle: kept alive)",
       across_workers="livesum"),
    _d("gateway_asyncio_tasks", "gauge", (), "asyncio tasks alive in this process (a leak is a rising floor)",
       across_workers="livesum"),
)

BY_NAME = {definition.name: definition for definition in DEFINITIONS}
# The ones `HotCounters` exposes from plain integers (not prometheus_client objects).
HOT = frozenset({"ls_rest_api_calls_total", "gateway_http_requests_in_flight", "gateway_streams_open",
                 "gateway_stream_events_total"})
# The ones read from the gateway's state when scraped (`observability/state.py`).
SCRAPED = frozenset({"gateway_upstream_capability_mode", "gateway_db_pool_connections",
                     "gateway_upstream_circuit_state", "gateway_upstream_connections", "gateway_asyncio_tasks"})


class HotCounters(Collector):
    """Plain integers the request path bumps, made samples only when scraped."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.rest_calls: dict[str, dict[int, int]] = {}    # path template → status → calls
        self.streams_open: dict[str, int] = dict.fromkeys(BACKENDS, 0)
        self.stream_events: dict[str, int] = dict.fromkeys(BACKENDS, 0)

    def collect(self) -> Iterable[Any]:
        calls = CounterMetricFamily("ls_rest_api_calls", BY_NAME["ls_rest_api_calls_total"].help,
                                    labels=("path", "status_code"))
        for path, by_status in list(self.rest_calls.items()):
            for status, count in list(by_status.items()):
                calls.add_metric((path, str(status)), count)
        yield calls
        yield GaugeMetricFamily("gateway_http_requests_in_flight",
                                BY_NAME["gateway_http_requests_in_flight"].help, value=self.in_flight)
        streams = GaugeMetricFamily("gateway_streams_open", BY_NAME["gateway_streams_open"].help, labels=("backend",))
        for backend, count in self.streams_open.items():
            streams.add_metric((backend,), count)
        yield streams
        events = CounterMetricFamily("gateway_stream_events", BY_NAME["gateway_stream_events_total"].help,
                                     labels=("backend",))
        for backend, count in self.stream_events.items():
            events.add_metric((backend,), count)
        yield events


class Metrics:
    """One application's metrics, in its own registry: `metric(name)` is the family of
    a definition (`observability/plain.py`; callers bind its label children once);
    `exposition.render()` is the registry's text for `/metrics`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.hot = HotCounters()
        self._metrics = {d.name: Family(d.name, d.kind, d.help, d.labels, d.buckets) for d in DEFINITIONS
                         if d.name not in HOT and d.name not in SCRAPED}
        self._histograms = tuple(family for family in self._metrics.values() if family.kind == "histogram")
        self.registry.register(self.hot)
        self.plain = plain = PlainCollector(self._metrics.values())
        self.registry.register(plain)
        # One of a group of workers (`PROMETHEUS_MULTIPROC_DIR`): the group's series,
        # merged from every worker's files (`observability/group.py`); else this registry's.
        self.group = from_environment(DEFINITIONS, self.registry, plain)
        self.exposition: Exposition | GroupExposition = self.group or Exposition(self.registry, plain)

    def metric(self, name: str) -> Family:
        return self._metrics[name]

    def fold(self) -> None:
        """Every histogram's pending observations into its buckets."""
        for family in self._histograms:
            family.fold()

    async def folding(self, every: float = FOLD_EVERY) -> None:
        """Fold every `every` seconds until cancelled: the hot paths only append an
        observation (no length check per observation), and this bounds what waits to be
        sorted into buckets to a second's worth when nothing scrapes."""
        while True:
            await asyncio.sleep(every)
            try:
                self.fold()
                if self.group is not None:
                    self.group.write()   # this worker's values where the group's scrapes read them
            except Exception:   # a metric never stops the gateway
                log.exception("metrics: folding observations failed")

    def close(self) -> None:
        """A worker of a group leaves its last counts in the group's files."""
        if self.group is not None:
            try:
                self.group.close()
            except Exception:   # a metric never stops the gateway, nor its shutdown
                log.exception("metrics: writing this worker's last counts failed")
