"""grafana/ without a Prometheus: every metric the dashboard and the alert rules read is
one /metrics exposes (gateway/observability/metrics.py), every panel query is filtered
by the instance variable and reads the datasource variable, the panels tile the grid,
and the provisioning files point at the dashboard. Their PromQL against a real
Prometheus: tests/e2e/test_prometheus.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gateway.observability.metrics import DEFINITIONS
from tests.support import prometheus as prom

GRAFANA = prom.ROOT / "grafana"
# A metric name in PromQL: our prefixes, then a histogram's series suffix if any.
METRIC = re.compile(r"\b((?:ls|gateway)_[a-z_]+?)(_bucket|_sum|_count)?\b(?=\s*[{\[)]|\s*$|\s*[=<>!])")


def exposed() -> set[str]:
    return {definition.name for definition in DEFINITIONS}


def metrics_in(expr: str) -> set[str]:
    found = set()
    for name, suffix in METRIC.findall(expr):
        histogram = any(d.name == name and d.kind == "histogram" for d in DEFINITIONS)
        assert not suffix or histogram, f"{name}{suffix}: a suffix on a metric that is no histogram"
        found.add(name)
    return found


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(prom.ALERTS.read_text())["groups"] for rule in group["rules"]]


def test_every_metric_the_dashboard_reads_is_exposed():
    queries = prom.dashboard_queries(prom.load_dashboard())
    read = set().union(*(metrics_in(query.expr) for query in queries))
    assert read and read <= exposed(), sorted(read - exposed())
    # The subjects the dashboard promises each have a panel reading their metrics.
    for name in ("ls_rest_api_calls_total", "ls_response_duration_seconds", "gateway_time_to_first_event_seconds",
                 "gateway_streams_open", "ls_llm_token_sent_total", "gateway_quota_refusals_total",
                 "gateway_quota_cluster_balance_tokens", "gateway_upstream_request_duration_seconds",
                 "gateway_engine_rounds_total", "gateway_tool_calls_total", "gateway_db_operation_duration_seconds",
                 "ls_auth_attempts_total", "gateway_stream_duration_seconds", "ls_llm_validation_errors_total"):
        assert name in read, name


def test_every_metric_an_alert_reads_is_exposed():
    read = set().union(*(metrics_in(rule["expr"]) for rule in alert_rules()))
    assert read and read <= exposed(), sorted(read - exposed())
    for rule in alert_rules():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_queries_use_the_variables_and_nothing_else():
    dashboard = prom.load_dashboard()
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["includeAll"] and variables["instance"]["multi"]
    for panel in prom.panels(dashboard):
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            # Every selector of every metric filtered by instance: a replica's view.
            selectors = re.findall(r"\b(?:ls|gateway)_[a-z_]+(\{[^}]*\})?", target["expr"])
            assert selectors and all('instance=~"$instance"' in selector for selector in selectors), target["expr"]
            substituted = prom.substitute(target["expr"], {"instance": ".+", "datasource": "x"})
            assert "$" not in substituted and "[[" not in substituted


def test_panels_tile_the_grid_without_overlap():
    dashboard = prom.load_dashboard()
    taken: set[tuple[int, int]] = set()
    ids = []
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                 for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells
        ids.append(panel["id"])
    assert len(ids) == len(set(ids))


def test_substitution_of_variables_and_macros():
    expr = 'rate(x{instance=~"$instance"}[$__rate_interval]) / ${instance:regex} [[instance]] $__range'
    assert prom.substitute(expr, {"instance": "a"}) == 'rate(x{instance=~"a"}[20s]) / a a 1m'
    with pytest.raises(KeyError):
        prom.substitute("$unknown", {})
    assert prom.instance_regex(["127.0.0.1:80", "127.0.0.1:81"]) == r"(127\\.0\\.0\\.1:80|127\\.0\\.0\\.1:81)"


def test_provisioning_points_at_the_dashboard():
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    assert [source["type"] for source in datasources["datasources"]] == ["prometheus"]
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "gateway.yaml").read_text())["providers"]
    assert providers[0]["type"] == "file" and Path(providers[0]["options"]["path"]).name == "gateway"
    assert prom.DASHBOARD.parent.name == "dashboards" and prom.load_dashboard()["uid"] == "gateway-overview"
