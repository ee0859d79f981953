"""`/metrics`'s renderer writes exactly what prometheus_client's `generate_latest` writes
for the same registry, on the first scrape and on the cached ones after it."""

from __future__ import annotations

from typing import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from gateway.observability import exposition
from gateway.observability.exposition import Exposition
from gateway.observability.metrics import Metrics


class _Odd(Collector):
    """What the gateway's own collectors never yield: a timestamp, an info and a summary
    family (written by the library itself), and a value that changes between scrapes."""

    def __init__(self) -> None:
        self.value = 1.0

    def collect(self) -> Iterable:
        stamped = GaugeMetricFamily("odd_stamped", "a gauge with a timestamp", labels=("k",))
        stamped.add_metric(("v",), 3, timestamp=1700000000.5)
        yield stamped
        yield InfoMetricFamily("odd_build", "build facts", value={"version": "1.2"})
        summary = SummaryMetricFamily("odd_latency_seconds", "a summary", labels=("op",))
        summary.add_metric(("read",), count_value=4, sum_value=0.5)
        yield summary
        changing = GaugeMetricFamily("odd_changing", "help with a \\ backslash\nand a newline")
        changing.add_metric((), self.value)
        yield changing


def _populated() -> tuple[Metrics, _Odd]:
    metrics = Metrics()
    metrics.hot.rest_calls["/v1/responses"] = {200: 7, 429: 1}
    metrics.hot.in_flight = 2
    metrics.hot.stream_events["engine"] += 12_345_678
    calls = metrics.metric("ls_llm_calls_total")
    calls.labels("llama", 'mo"del\\with\nodd ünïcode', "/v1/query").inc(3)
    inference = metrics.metric("ls_llm_inference_duration_seconds")
    for seconds in (0.05, 0.7, 3.0, 500.0):
        inference.labels("llama", "m", "/v1/responses", "success").observe(seconds)
    metrics.metric("gateway_quota_cluster_balance_tokens").labels("cluster").set(float("inf"))
    metrics.metric("gateway_db_operation_duration_seconds").labels("write").observe(1e-7)
    metrics.metric("ls_started_in_degraded_mode").set(1)
    odd = _Odd()
    metrics.registry.register(odd)
    return metrics, odd


def test_renders_what_generate_latest_renders():
    metrics, odd = _populated()
    assert metrics.exposition.render() == generate_latest(metrics.registry)
    # The second scrape writes its series from the cache, with the values of now.
    odd.value = 2.5e21
    metrics.hot.rest_calls["/v1/responses"][200] += 1
    metrics.metric("ls_llm_inference_duration_seconds").labels("llama", "m", "/v1/responses", "success").observe(9)
    second = metrics.exposition.render()
    assert second == generate_latest(metrics.registry)
    assert b'ls_rest_api_calls_total{path="/v1/responses",status_code="200"} 8.0\n' in second
    assert b"odd_changing 2.5e+21\n" in second


def test_a_cache_past_its_bound_starts_again(monkeypatch):
    monkeypatch.setattr(exposition, "MAX_CACHED", 3)
    registry = CollectorRegistry()
    gauges = GaugeMetricFamily("many", "many series", labels=("n",))
    for n in range(10):
        gauges.add_metric((str(n),), n)

    class _Many(Collector):
        def collect(self) -> Iterable:
            yield gauges

    registry.register(_Many())
    rendered = Exposition(registry)
    assert rendered.render() == generate_latest(registry)
    assert len(rendered._series) == 10
    assert rendered.render() == generate_latest(registry)   # cleared, then filled again
    assert len(rendered._series) == 10
