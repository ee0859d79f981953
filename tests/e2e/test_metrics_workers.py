"""`/metrics` across a group of workers (issue 43, observability/group.py), without the
supervisor: `gateway serve` processes on one SQLite file, each on its own port, with
the one `PROMETHEUS_MULTIPROC_DIR` and their own `GATEWAY_WORKER_ID`, as `service.workers`
starts them. Turns sent to each; a scrape of either carries the group's sums exactly
(LCORE's `ls_llm_*` counters, the token counters, the histograms' counts), the per-process
state gauges once per worker (a `worker` label), no `pid` label; a worker that stops keeps
its counts, its last turn's included, and one killed outright keeps what it had written,
while `mark_process_dead` drops its live gauges. The dashboard's queries against a real
Prometheus scraping a group: tests/e2e/test_prometheus.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from prometheus_client.multiprocess import mark_process_dead

from tests.e2e.test_metrics import Samples, moved, scrape, total
from tests.support.gateway_proc import Gateway, events_of, gateway_config, start_gateway

# How long a worker's counts may take to reach the group's files (its once-a-second copy).
SEEN_WITHIN = 10.0
# What turns count, the same whichever worker is scraped (requests and database statements
# also count the scrapes themselves).
COUNTED = ("ls_llm_calls_total", "ls_llm_calls_failures_total", "ls_llm_token_sent_total",
           "ls_llm_token_received_total", "ls_llm_inference_duration_seconds_count", "gateway_turns_total",
           "gateway_time_to_first_event_seconds_count", "gateway_stream_duration_seconds_count",
           "gateway_stream_events_total", "gateway_upstream_request_duration_seconds_count")


@pytest.fixture
def start_group(tmp_path, upstream):
    """`start_group(n)`: n workers of one group, on one SQLite file."""
    started: list[Gateway] = []
    directory = tmp_path / "prometheus-multiproc"
    directory.mkdir()
    config = gateway_config(upstream.url, tmp_path / "gateway.db",
                            inference={"default_provider": "scripted", "default_model": "scripted-chat"})

    def start(count: int) -> list[Gateway]:
        for index in range(len(started), len(started) + count):
            started.append(start_gateway(tmp_path / f"worker-{index}", config, env={
                "PROMETHEUS_MULTIPROC_DIR": str(directory), "GATEWAY_WORKER_ID": str(index)}))
        return started

    start.directory = directory   # type: ignore[attr-defined]
    yield start
    for gateway in started:
        gateway.stop()


def json_turn(gateway: Gateway, usage: dict[str, int], text: str = "Hello") -> None:
    response = gateway.post("/v1/responses", {"input": text}).ok()
    usage["in"] += response["usage"]["input_tokens"]
    usage["out"] += response["usage"]["output_tokens"]
    usage["turns"] += 1


def stream_turn(gateway: Gateway, usage: dict[str, int]) -> None:
    status, frames = gateway.stream({"input": "Hello, streamed"})
    assert status == 200
    events = list(events_of(frames))
    completed = [event for event in events if event["type"] == "response.completed"][0]["response"]
    usage["in"] += completed["usage"]["input_tokens"]
    usage["out"] += completed["usage"]["output_tokens"]
    usage["turns"] += 1
    usage["streams"] += 1
    usage["events"] += len(events)


def until_counted(gateway: Gateway, before: Samples, turns: int) -> Samples:
    """A scrape once every turn has reached the group's files: the other workers' counts
    arrive with their next copy (at most a second)."""
    deadline = time.monotonic() + SEEN_WITHIN
    while True:
        now = scrape(gateway)
        if moved(before, now, "ls_llm_calls_total") >= turns or time.monotonic() > deadline:
            return now
        time.sleep(0.2)


def workers_of(samples: Samples, name: str) -> set[str]:
    return {dict(labels).get("worker", "") for (sample, labels), _ in samples.items() if sample == name}


def test_a_scrape_of_either_worker_carries_the_groups_sums(start_group):
    first, second = start_group(2)
    before = until_counted(first, {}, 0)
    usage = dict.fromkeys(("in", "out", "turns", "streams", "events"), 0)
    for text in ("Hello", "Hello again", "And again"):
        json_turn(first, usage, text)
    json_turn(second, usage)
    stream_turn(second, usage)
    assert usage["in"] and usage["out"] and usage["events"]
    scrapes = [until_counted(first, before, usage["turns"]), until_counted(second, before, usage["turns"])]
    for after in scrapes:
        assert moved(before, after, "ls_llm_calls_total") == usage["turns"]
        assert moved(before, after, "ls_llm_calls_failures_total") == 0
        assert moved(before, after, "ls_llm_token_sent_total") == usage["in"]
        assert moved(before, after, "ls_llm_token_received_total") == usage["out"]
        assert moved(before, after, "ls_llm_inference_duration_seconds_count") == usage["turns"]
        assert moved(before, after, "gateway_turns_total", outcome="completed") == usage["turns"]
        assert moved(before, after, "gateway_time_to_first_event_seconds_count") == usage["turns"]
        assert moved(before, after, "gateway_time_to_first_event_seconds_count", mode="stream") == 1
        assert moved(before, after, "gateway_stream_duration_seconds_count") == usage["streams"]
        assert moved(before, after, "gateway_stream_events_total") == usage["events"]
        assert moved(before, after, "ls_rest_api_calls_total", path="/v1/responses", status_code="200") \
            == usage["turns"]
        # A histogram's +Inf bucket is its count, summed over workers as its buckets are.
        assert total(after, "ls_llm_inference_duration_seconds_bucket", le="+Inf") \
            == total(after, "ls_llm_inference_duration_seconds_count")
        # The per-process state once per worker; every other series merged (no `pid`).
        assert workers_of(after, "gateway_upstream_capability_mode") == {"0", "1"}
        assert not any(key == "pid" for _, labels in after for key, _ in labels)
        # A gauge the same on every worker is one series, not one per worker.
        assert len([k for k in after if k[0] == "ls_provider_model_configuration"]) >= 1
        assert all("worker" not in dict(labels) for (name, labels) in after
                   if name == "ls_provider_model_configuration")
    # Both workers answer the same turn counts (their scrapes differ only in the scrapes themselves).
    for name in COUNTED:
        assert total(scrapes[0], name) == total(scrapes[1], name), name


def test_a_stopped_or_killed_worker_keeps_its_counts_and_leaves_the_live_gauges(start_group):
    first, stopped, killed = start_group(3)
    directory: Path = start_group.directory
    before = until_counted(first, {}, 0)
    usage = dict.fromkeys(("in", "out", "turns", "streams", "events"), 0)
    json_turn(killed, usage)
    # Killed outright: it keeps what it wrote (at most a second behind), so wait until written.
    until_counted(first, before, usage["turns"])
    killed_pid = killed.proc.popen.pid
    assert (directory / f"counter_{killed_pid}.db").exists()
    os.kill(killed_pid, signal.SIGKILL)
    killed.proc.popen.wait(10)
    assert workers_of(scrape(first), "gateway_upstream_capability_mode") == {"0", "1", "2"}   # not yet known dead
    mark_process_dead(killed_pid, str(directory))   # the supervisor's, once it reaps a worker
    # Stopped (SIGTERM) right after a turn, before its next copy: it writes its last counts as it stops.
    json_turn(stopped, usage)
    stopped_pid = stopped.proc.popen.pid
    stopped.stop()
    after = scrape(first)
    assert moved(before, after, "ls_llm_calls_total") == usage["turns"] == 2
    assert moved(before, after, "ls_llm_token_sent_total") == usage["in"]
    assert moved(before, after, "ls_llm_token_received_total") == usage["out"]
    assert moved(before, after, "gateway_time_to_first_event_seconds_count") == usage["turns"]
    assert moved(before, after, "gateway_turns_total", outcome="completed") == usage["turns"]
    # Their live gauges are gone: the state per worker, and what was in flight.
    assert workers_of(after, "gateway_upstream_capability_mode") == {"0"}
    assert total(after, "gateway_http_requests_in_flight") == 1   # this scrape
    assert not list(directory.glob(f"gauge_*_{stopped_pid}.db"))
    assert not list(directory.glob(f"gauge_*_{killed_pid}.db"))
    assert (directory / f"counter_{stopped_pid}.db").exists() and (directory / f"histogram_{killed_pid}.db").exists()
