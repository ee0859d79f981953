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


def test_plain_families_are_written_from_their_numbers(monkeypatch):
    """The gateway's own families are written straight from their children (no sample
    objects), derived children and observations still pending included, and the result
    is still `generate_latest`'s."""
    from gateway.observability.plain import Counted, Family

    metrics, _ = _populated()
    inference = metrics.metric("ls_llm_inference_duration_seconds")
    ok, failed = (inference.labels("p", "m", "/v1/query", result) for result in ("success", "failure"))
    ok.pending.append(0.3)   # as the hot paths observe: an append, folded later
    failed.pending.append(42.0)
    metrics.metric("ls_llm_calls_total").derive(("p", "m", "/v1/query"), Counted(ok, failed))
    expected = generate_latest(metrics.registry)
    ok.pending.append(0.3)   # undo the fold generate_latest did: pending again
    failed.counts[:] = [0] * len(failed.counts)
    failed.sum = 0.0
    failed.pending.append(42.0)
    ok.counts[:] = [0] * len(ok.counts)
    ok.sum = 0.0

    def no_samples(self):
        raise AssertionError(f"{self.name}: made samples")
    monkeypatch.setattr(Family, "sample_family", no_samples)
    assert metrics.exposition.render() == expected
    assert ok.pending == [] and failed.pending == []
    assert metrics.exposition.render() == expected   # from the cache
    monkeypatch.undo()
    assert generate_latest(metrics.registry) == expected   # the collector answers the library as before


def test_metrics_fold_every_histogram():
    metrics = Metrics()
    child = metrics.metric("gateway_time_to_first_event_seconds").labels("forward", "json")
    child.pending.extend([0.002, 0.2, 7.0])
    metrics.fold()
    assert child.pending == [] and sum(child.counts) == 3 and child.sum == 7.202


def test_metrics_folding_folds_until_cancelled():
    import asyncio

    async def run() -> None:
        metrics = Metrics()
        child = metrics.metric("gateway_upstream_request_duration_seconds").labels("responses", "ok")
        folding = asyncio.ensure_future(metrics.folding(0.01))
        child.pending.append(0.004)
        await asyncio.sleep(0.05)
        assert child.pending == [] and sum(child.counts) == 1
        folding.cancel()
        await asyncio.gather(folding, return_exceptions=True)
        assert folding.cancelled()
    asyncio.run(run())
