"""A real Prometheus for tests and for the dashboard's picture (Debian's binaries,
unpacked by scripts/prometheus/setup.sh into .cache/prometheus), and the dashboard's
queries as Prometheus evaluates them.

    server = start_prometheus(log_dir, ["127.0.0.1:8080"], rule_files=[ALERTS])
    server.query('sum(rate(ls_rest_api_calls_total[20s]))')   # the instant vector
    server.stop()                                              # stopped, data dir removed

    for query in dashboard_queries(load_dashboard()):          # every panel's targets
        expr = substitute(query.expr, {"instance": ".+"}, MACROS)

Prometheus listens on a free loopback port with a temporary data directory and scrapes
every second; nothing of it is left once stopped.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from tests.support.processes import ROOT, Proc, free_port, spawn

BIN = ROOT / ".cache" / "prometheus" / "usr" / "bin"
SETUP_SCRIPT = "scripts/prometheus/setup.sh"
REQUIRE_ENV = "GATEWAY_REQUIRE_PROMETHEUS"
DASHBOARD = ROOT / "grafana" / "dashboards" / "gateway.json"
ALERTS = ROOT / "grafana" / "alerts.yaml"
START_TIMEOUT = 30.0

# Grafana's interval macros as fixed values for a 1 s scrape interval: $__rate_interval
# spans many scrapes, $__range a few minutes of a test's workload.
MACROS = {"__rate_interval": "20s", "__interval": "5s", "__interval_ms": "5000", "__range": "1m",
          "__range_s": "60", "__range_ms": "60000"}


def installed() -> bool:
    return (BIN / "prometheus").is_file() and (BIN / "promtool").is_file()


def require() -> None:
    """Skip the calling test without Prometheus set up, or fail it under
    GATEWAY_REQUIRE_PROMETHEUS=1 (make test): the package could not be had."""
    import pytest

    if not installed():
        reason = f"Prometheus is not set up (Debian's package could not be had): run {SETUP_SCRIPT}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "promtool"), *args], capture_output=True, text=True, timeout=60)


class Prometheus:
    def __init__(self, proc: Proc, port: int, data: Path):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._data = data

    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/<path>: its `data`, or an AssertionError with Prometheus's error."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
        assert body.get("status") == "success", f"{path} {params}: {body.get('errorType')}: {body.get('error')}"
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result: the series (or a scalar as one series without labels)."""
        data = self.api("query", query=expr, **({"time": at} if at is not None else {}))
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def targets_up(self) -> list[str]:
        return [target["labels"]["instance"] for target in self.api("targets")["activeTargets"]
                if target["health"] == "up"]

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]

    def stop(self) -> None:
        self.proc.stop()
        shutil.rmtree(self._data, ignore_errors=True)


def start_prometheus(log_dir: Path, targets: list[str], rule_files: list[Path] = (),
                     scrape_interval: str = "1s") -> Prometheus:
    """Prometheus scraping `targets` (host:port of `/metrics`) as job `gateway`, with
    `rule_files` loaded and evaluated at the scrape interval."""
    assert installed(), f"Prometheus is not set up: run {SETUP_SCRIPT}"
    base = Path(tempfile.mkdtemp(prefix="gateway-prometheus-"))
    config = {"global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval,
                         "scrape_timeout": scrape_interval},
              "rule_files": [str(path) for path in rule_files],
              "scrape_configs": [{"job_name": "gateway", "static_configs": [{"targets": targets}]}]}
    (base / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = spawn(f"prometheus-{port}", [
        str(BIN / "prometheus"), f"--config.file={base / 'prometheus.yml'}",
        f"--storage.tsdb.path={base / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1h", "--log.level=warn"], log_dir, cwd=base)
    server = Prometheus(proc, port, base)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.popen.poll() is not None:
            shutil.rmtree(base, ignore_errors=True)
            raise RuntimeError(f"prometheus exited with {proc.popen.returncode}:\n{proc.log()}")
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"prometheus not ready on port {port}:\n{proc.log()}")
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------
# The dashboard's queries.


@dataclass(frozen=True)
class PanelQuery:
    panel: str       # the panel's title
    ref: str         # the target's refId
    expr: str        # PromQL with Grafana's variables and macros
    legend: str


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that is not a row, those inside collapsed rows included."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_queries(dashboard: dict[str, Any]) -> list[PanelQuery]:
    return [PanelQuery(panel["title"], target["refId"], target["expr"], target.get("legendFormat", ""))
            for panel in panels(dashboard) for target in panel.get("targets", []) if not target.get("hide")]


_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def substitute(expr: str, variables: dict[str, str], macros: dict[str, str] = MACROS) -> str:
    """Grafana's `$name`, `${name}`, `${name:format}` and `[[name]]` replaced by fixed
    values (a variable's value, or a macro's); an unknown name is an error."""
    values = {**macros, **variables}

    def value(match: re.Match) -> str:
        name = next(group for group in match.groups() if group)
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(value, expr)


def instance_regex(instances: list[str]) -> str:
    """What Grafana puts in `instance=~"$instance"` for several selected values."""
    escaped = [re.escape(instance).replace("\\", "\\\\") for instance in instances]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def values_of(result: list[dict[str, Any]]) -> list[float]:
    """Every sample value of an instant or range query's result."""
    found = []
    for series in result:
        samples = series.get("values") or [series["value"]]
        found += [float(value) for _, value in samples]
    return found


def finite(result: list[dict[str, Any]]) -> bool:
    return all(math.isfinite(value) for value in values_of(result))
