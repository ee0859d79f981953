"""The dashboard and the alert rules against a real Prometheus (Debian's, unpacked by
scripts/prometheus/setup.sh): Prometheus scrapes three `gateway serve` processes on
PostgreSQL every second while a scripted workload runs (tests/support/metrics_workload.py,
the rare series included), and every panel's PromQL in grafana/dashboards/gateway.json,
its variables and Grafana's interval macros replaced by fixed values, returns a
non-empty, finite result through Prometheus's HTTP API, and the per-route panels draw
LCORE's query API's routes too; and again with the forward gateway a group of two
workers (`service.workers`, issue 43) scraped through one of them. The alert rules load and
evaluate without error in that Prometheus (promtool: tests/grafana/test_alerts.py). Without
Prometheus set up the tests skip, and fail under GATEWAY_REQUIRE_PROMETHEUS=1 (make test)."""

from __future__ import annotations

import socket
import time

import pytest
import yaml

from tests.support import prometheus as prom
from tests.support.mcp_server import running_mcp_server
from tests.support.metrics_workload import MetricsStack

# Long enough for rates over $__rate_interval to hold every series of the workload.
EVALUATE_FOR = 90.0
# The panels drawn per route (`path`), and the query API's routes they must show.
PER_ROUTE = ("Requests by route", "Latency percentiles per route")
QUERY_ROUTES = frozenset({"/v1/query", "/v1/streaming_query", "/v1/streaming_query/interrupt"})


def prom_exprs(queries: list[prom.PanelQuery], variables: dict[str, str]) -> dict[tuple[str, str], str]:
    return {(query.panel, query.ref): prom.substitute(query.expr, variables) for query in queries}


@pytest.fixture(scope="module")
def prometheus_installed() -> None:
    prom.require()


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-metrics")


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-metrics-faulty", faulty=True)


@pytest.mark.timeout(360)   # three gateways, Prometheus, and up to EVALUATE_FOR of workload
# One run covers both shapes: the forward gateway is a group of two workers, the engine and
# the degraded ones single processes (CI's time: each run is ~40 s of workload).
@pytest.mark.parametrize("workers", [2])
def test_every_panel_query_answers_from_a_real_prometheus(prometheus_installed, gateway_factory, upstream,
                                                           chat_upstream, postgres, mcp, faulty, tmp_path, workers):
    """With `workers: 2`, the forward gateway is a group of two workers scraped through
    one of them, as Prometheus scrapes `service.workers`' one port."""
    group = None
    if workers > 1:
        group = tmp_path / "prometheus-multiproc"
        group.mkdir()
    stack = MetricsStack(gateway_factory, upstream, chat_upstream, postgres, mcp, faulty, group=group)
    queries = prom.dashboard_queries(prom.load_dashboard())
    assert len(queries) >= 30
    server = prom.start_prometheus(tmp_path / "prometheus", stack.targets(), rule_files=[prom.ALERTS])
    try:
        with stack.running():
            deadline = time.monotonic() + EVALUATE_FOR
            while sorted(server.targets_up()) != sorted(stack.targets()):
                assert time.monotonic() < deadline, f"not scraped: {server.api('targets')['activeTargets']}"
                time.sleep(0.5)
            # The instance variable's values: every gateway.
            assert sorted(server.api("label/instance/values", **{"match[]": "gateway_http_requests_in_flight"})) \
                == sorted(stack.targets())
            variables = {"instance": prom.instance_regex(stack.targets()), "datasource": "prometheus"}
            unanswered = prom_exprs(queries, variables)
            results: dict = {}
            # Retried until each answers: a rare series needs a few scrapes to have a rate.
            while unanswered and time.monotonic() < deadline:
                for key, expr in list(unanswered.items()):
                    result = server.query(expr)
                    results[key] = result
                    if result and prom.finite(result):
                        del unanswered[key]
                time.sleep(1)
            # The per-route panels draw every route the workload calls, LCORE's query API included.
            per_route = {key: expr for key, expr in prom_exprs(queries, variables).items() if key[0] in PER_ROUTE}
            assert len(per_route) == 4, per_route   # requests, and three latency percentiles
            missing = dict.fromkeys(per_route, QUERY_ROUTES)
            while any(missing.values()) and time.monotonic() < deadline:
                for key, expr in per_route.items():
                    missing[key] = QUERY_ROUTES - {series["metric"].get("path") for series in server.query(expr)}
                time.sleep(1)
            if group is not None:
                # The group's one target carries each worker's per-process state (a
                # `worker` label) and every other series merged (no `pid`).
                forward = f'instance="127.0.0.1:{stack.forward.direct_port}"'
                assert sorted(series["metric"]["worker"] for series in server.query(
                    f"count by (worker) (gateway_upstream_circuit_state{{{forward}}})")) == ["0", "1"]
                assert not server.query(f'count by (pid) ({{{forward}, pid!=""}})')
            rules = server.rules()
        if unanswered:
            pytest.fail("empty or not finite: " + "; ".join(f"{panel} [{ref}] {expr} -> {results.get((panel, ref))}"
                                                            for (panel, ref), expr in unanswered.items()))
        assert not any(missing.values()), missing
        assert not stack.errors, sorted(set(stack.errors))
        assert stack.rounds >= 3
        # Every alert rule loaded and evaluated without an error.
        defined = [rule["alert"] for group in yaml.safe_load(prom.ALERTS.read_text())["groups"]
                   for rule in group["rules"]]
        assert sorted(rule["name"] for rule in rules) == sorted(defined)
        assert all(rule["health"] == "ok" for rule in rules), [(r["name"], r.get("lastError")) for r in rules]
    finally:
        server.stop()
    # Nothing left listening.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
