"""Metric families kept as plain numbers and turned into samples when scraped:
cumulative histogram buckets, gauges kept or read from state at each scrape, pending
observations folded into the same buckets as one at a time."""

from __future__ import annotations

import random
from bisect import bisect_left

import pytest
from prometheus_client import generate_latest

from gateway.observability.metrics import LCORE_BUCKETS, Metrics
from gateway.observability.plain import FOLD_AT, Buckets


def test_plain_histograms_expose_cumulative_le_buckets():
    metrics = Metrics()
    histogram = metrics.metric("gateway_time_to_first_event_seconds").labels("forward", "stream")
    for seconds in (0.0005, 0.001, 0.02, 0.02, 100.0):   # 0.001 falls in le="0.001" (le is <=)
        histogram.observe(seconds)
    text = generate_latest(metrics.registry).decode()
    def line(suffix: str, le: str | None) -> str:
        bucket = f',le="{le}"' if le else ""
        return f'gateway_time_to_first_event_seconds_{suffix}{{backend="forward"{bucket},mode="stream"}}'
    assert f"{line('bucket', '0.001')} 2.0" in text
    assert f"{line('bucket', '0.025')} 4.0" in text
    assert f"{line('bucket', '60.0')} 4.0" in text
    assert f"{line('bucket', '+Inf')} 5.0" in text
    assert f"{line('count', None)} 5.0" in text
    gauge = metrics.metric("gateway_background_responses_running")
    gauge.inc()
    gauge.inc()
    gauge.dec()
    assert "gateway_background_responses_running 1.0" in generate_latest(metrics.registry).decode()


def test_a_gauge_read_from_state_is_read_at_each_scrape():
    """`gateway_background_responses_running` is the background runs' own count, read
    when scraped (`Family.read_from`), never kept up to date by the turns."""
    metrics = Metrics()
    running = [object(), object()]
    metrics.metric("gateway_background_responses_running").read_from(lambda: len(running))
    assert "gateway_background_responses_running 2.0" in generate_latest(metrics.registry).decode()
    running.pop()
    assert b"gateway_background_responses_running 1.0" in metrics.exposition.render()
    with pytest.raises(ValueError):
        metrics.metric("gateway_turns_total").read_from(lambda: 1)


def test_pending_observations_fold_into_the_same_buckets_as_one_at_a_time():
    bounds = LCORE_BUCKETS
    rng = random.Random(7)
    values = [rng.choice([rng.uniform(0, 200), *bounds]) for _ in range(3 * FOLD_AT + 5)]   # bounds themselves too
    child = Buckets(tuple(float(bound) for bound in bounds))
    expected = [0] * (len(bounds) + 1)
    for value in values:
        child.observe(value)
        expected[bisect_left(bounds, value)] += 1
    assert len(child.pending) == 5   # folded every FOLD_AT, the rest still pending
    child.fold()
    assert child.counts == expected and child.pending == []
    assert abs(child.sum - sum(values)) < 1e-6
