"""A group of workers' metrics (observability/group.py): two workers' registries in one
directory, as `service.workers: 2` runs them (distinct process ids given here, the
same process playing both); a scrape of either shows the group's sums, each gauge by its
mode, a stopped or dead worker's counts kept and its live gauges gone. Through two
`gateway serve` processes: tests/e2e/test_metrics_workers.py."""

from __future__ import annotations

from typing import Any, Iterable

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import mark_process_dead
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from gateway.observability import group
from gateway.observability.exposition import Exposition
from gateway.observability.metrics import DEFINITIONS, Metrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Circuit(Collector):
    """A per-process state read when scraped, as `StateCollector`'s circuit gauge."""

    def __init__(self, state: float):
        self.state = state

    def collect(self) -> Iterable[Any]:
        gauge = GaugeMetricFamily("gateway_upstream_circuit_state", "circuit", labels=("upstream",))
        gauge.add_metric(("http://upstream",), self.state)
        yield gauge


def worker(directory, pid: int, worker_id: str) -> Metrics:
    metrics = Metrics()
    metrics.group = group.from_environment(DEFINITIONS, metrics.registry, metrics.plain, pid=pid, environ={
        group.DIRECTORY_ENV: str(directory), group.WORKER_ENV: worker_id})
    assert metrics.group is not None
    metrics.exposition = metrics.group
    return metrics


def scrape(metrics: Metrics) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(metrics.exposition.render().decode()):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in samples, key   # one series each: merged, not repeated
            samples[key] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def turn(metrics: Metrics, tokens: int, seconds: float) -> None:
    metrics.metric("ls_llm_token_sent_total").labels("scripted", "m", "responses").inc(tokens)
    metrics.metric("gateway_time_to_first_event_seconds").labels("forward", "json").observe(seconds)
    metrics.hot.rest_calls.setdefault("/v1/responses", {}).setdefault(200, 0)
    metrics.hot.rest_calls["/v1/responses"][200] += 1


@pytest.fixture
def pair(tmp_path):
    a, b = worker(tmp_path, 1001, "0"), worker(tmp_path, 1002, "1")
    yield a, b


def test_counters_and_histograms_are_summed_whichever_worker_is_scraped(pair):
    a, b = pair
    turn(a, 10, 0.003)
    turn(a, 20, 0.2)
    turn(b, 5, 0.003)
    b.group.write()   # what b's folding does once a second; a writes its own as it is scraped
    for scraped in (a, b):
        samples = scrape(scraped)
        assert value(samples, "ls_llm_token_sent_total", provider="scripted", model="m", endpoint="responses") == 35
        assert value(samples, "ls_rest_api_calls_total", path="/v1/responses", status_code="200") == 3
        ttfe = dict(backend="forward", mode="json")
        assert value(samples, "gateway_time_to_first_event_seconds_count", **ttfe) == 3
        assert value(samples, "gateway_time_to_first_event_seconds_bucket", le="0.005", **ttfe) == 2
        assert value(samples, "gateway_time_to_first_event_seconds_bucket", le="0.25", **ttfe) == 3
        assert value(samples, "gateway_time_to_first_event_seconds_bucket", le="+Inf", **ttfe) == 3
        assert value(samples, "gateway_time_to_first_event_seconds_sum", **ttfe) == pytest.approx(0.206)


def test_each_gauge_by_its_mode(pair):
    a, b = pair
    a.hot.in_flight, b.hot.in_flight = 2, 3                       # livesum
    a.metric("ls_started_in_degraded_mode").set(1)                # livemax
    a.registry.register(Circuit(2))                               # by worker
    b.registry.register(Circuit(0))
    b.group.write()
    samples = scrape(a)
    assert value(samples, "gateway_http_requests_in_flight") == 5
    assert value(samples, "ls_started_in_degraded_mode") == 1
    circuit = {labels: v for (name, labels), v in samples.items() if name == "gateway_upstream_circuit_state"}
    assert circuit == {(("upstream", "http://upstream"), ("worker", "0")): 2,
                       (("upstream", "http://upstream"), ("worker", "1")): 0}
    assert not any(key == "pid" for _, labels in samples for key, _ in labels)


def test_a_stopped_worker_keeps_its_counts_and_leaves_the_live_gauges(pair):
    a, b = pair
    b.registry.register(Circuit(1))
    turn(b, 7, 0.01)
    b.hot.in_flight = 4
    b.close()   # a worker that stops: its last values written, its live gauges gone
    samples = scrape(a)
    assert value(samples, "ls_llm_token_sent_total", provider="scripted", model="m", endpoint="responses") == 7
    assert value(samples, "gateway_time_to_first_event_seconds_count", backend="forward", mode="json") == 1
    assert value(samples, "gateway_http_requests_in_flight") == 0
    assert not any(name == "gateway_upstream_circuit_state" for name, _ in samples)


def test_a_killed_worker_counts_to_its_last_write_and_mark_process_dead_drops_its_gauges(tmp_path):
    a, b = worker(tmp_path, 1001, "0"), worker(tmp_path, 1002, "1")
    turn(b, 7, 0.01)
    b.hot.in_flight = 4
    b.group.write()
    turn(b, 100, 0.01)   # after its last write: lost with it
    assert value(scrape(a), "gateway_http_requests_in_flight") == 4   # not yet known dead
    mark_process_dead(1002, str(tmp_path))   # the supervisor's, once it sees b gone
    samples = scrape(a)
    assert value(samples, "ls_llm_token_sent_total", provider="scripted", model="m", endpoint="responses") == 7
    assert value(samples, "gateway_http_requests_in_flight") == 0


def test_a_process_that_reuses_a_dead_ones_id_adds_to_its_counts(tmp_path):
    a = worker(tmp_path, 1001, "0")
    turn(a, 3, 0.01)
    a.group.write()   # then it dies, its files left
    again = worker(tmp_path, 1001, "0")
    turn(again, 2, 0.01)
    samples = scrape(again)
    assert value(samples, "ls_llm_token_sent_total", provider="scripted", model="m", endpoint="responses") == 5


def test_a_gauge_series_that_goes_is_gone_from_the_group(pair, tmp_path):
    a, b = pair
    circuit = Circuit(0)
    b.registry.register(circuit)
    b.group.write()
    circuit.state = 2
    b.group.write()   # written in place: no series gone
    assert b.group.files.replaced == 0
    assert value(scrape(a), "gateway_upstream_circuit_state", upstream="http://upstream", worker="1") == 2
    b.registry.unregister(circuit)   # as a capability mode's labels change once probed
    b.group.write()
    assert b.group.files.replaced == 1
    assert not any(name == "gateway_upstream_circuit_state" for name, _ in scrape(a))
    b.hot.in_flight = 3   # the rewritten file is written in place again
    b.group.write()
    assert value(scrape(a), "gateway_http_requests_in_flight") == 3
    assert not list(tmp_path.glob("*.tmp"))   # no half-written file left behind


def test_every_gauge_has_a_mode_across_workers():
    modes = group.modes_of(DEFINITIONS)
    assert set(modes) == {d.name for d in DEFINITIONS if d.kind == "gauge"}
    assert modes["gateway_http_requests_in_flight"] == "livesum"
    assert modes["gateway_upstream_circuit_state"] == "worker"
    unmoded = [d for d in DEFINITIONS if d.kind == "gauge"][0]
    with pytest.raises(ValueError, match="across_workers"):
        group.modes_of([unmoded.__class__(unmoded.name, "gauge", (), "help")])


def test_without_the_directory_nothing_changes(tmp_path, monkeypatch):
    monkeypatch.delenv(group.DIRECTORY_ENV, raising=False)
    metrics = Metrics()
    assert metrics.group is None and metrics.exposition.__class__ is Exposition
    metrics.close()   # nothing to write
    with pytest.raises(ValueError, match="not a directory"):
        group.from_environment(DEFINITIONS, metrics.registry, metrics.plain,
                               environ={group.DIRECTORY_ENV: str(tmp_path / "missing")})


def test_the_files_are_the_writing_processes(tmp_path, monkeypatch):
    """Named by the process that writes, not the one that built the registry: a worker
    forked after the application was built writes files of its own id."""
    metrics = Metrics()
    metrics.group = group.from_environment(DEFINITIONS, metrics.registry, metrics.plain,
                                           environ={group.DIRECTORY_ENV: str(tmp_path), group.WORKER_ENV: "0"})
    assert metrics.group is not None
    metrics.exposition = metrics.group
    monkeypatch.setattr(group.os, "getpid", lambda: 4343)   # the forked worker
    turn(metrics, 2, 0.01)
    samples = scrape(metrics)
    assert sorted(path.name for path in tmp_path.glob("*.db")) == [
        "counter_4343.db", "gauge_livemax_4343.db", "gauge_livesum_4343.db", "histogram_4343.db"]
    assert value(samples, "ls_llm_token_sent_total", provider="scripted", model="m", endpoint="responses") == 2


def test_a_failed_last_write_never_stops_a_shutdown(tmp_path, caplog, monkeypatch):
    metrics = worker(tmp_path, 1001, "0")

    def full(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(metrics.group.files, "write", full)
    metrics.close()   # logged, not raised: the application's other services still close
    assert "last counts failed" in caplog.text
