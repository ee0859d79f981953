"""The dashboard and the alert rules against a real Prometheus (Debian's, unpacked by
scripts/prometheus/setup.sh): Prometheus scrapes three `gateway serve` processes on
PostgreSQL every second while a scripted workload runs (tests/support/metrics_workload.py,
the rare series included), and every panel's PromQL in grafana/dashboards/gateway.json,
its variables and Grafana's interval macros replaced by fixed values, returns a
non-empty, finite result through Prometheus's HTTP API. The alert rules load and
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
def test_every_panel_query_answers_from_a_real_prometheus(prometheus_installed, gateway_factory, upstream,
                                                           chat_upstream, postgres, mcp, faulty, tmp_path):
    stack = MetricsStack(gateway_factory, upstream, chat_upstream, postgres, mcp, faulty)
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
            unanswered = {(query.panel, query.ref): prom.substitute(query.expr, variables) for query in queries}
            results: dict = {}
            # Retried until each answers: a rare series needs a few scrapes to have a rate.
            while unanswered and time.monotonic() < deadline:
                for key, expr in list(unanswered.items()):
                    result = server.query(expr)
                    results[key] = result
                    if result and prom.finite(result):
                        del unanswered[key]
                time.sleep(1)
            rules = server.rules()
        if unanswered:
            pytest.fail("empty or not finite: " + "; ".join(f"{panel} [{ref}] {expr} -> {results.get((panel, ref))}"
                                                            for (panel, ref), expr in unanswered.items()))
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
