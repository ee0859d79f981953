"""grafana/alerts.yaml through Prometheus's own promtool (Debian's, unpacked by
scripts/prometheus/setup.sh): the rules file is valid, and each alert fires on the
synthetic series of tests/grafana/alerts_test.yaml, and only there, with its labels and
annotations as written. Skipped without Prometheus set up, failed under
GATEWAY_REQUIRE_PROMETHEUS=1 (make test)."""

from __future__ import annotations

from pathlib import Path

from tests.support import prometheus as prom

UNIT_TESTS = Path(__file__).parent / "alerts_test.yaml"


def test_promtool_checks_the_alert_rules():
    prom.require()
    checked = prom.promtool("check", "rules", str(prom.ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_alerts_fire_on_their_conditions_only():
    prom.require()
    tested = prom.promtool("test", "rules", str(UNIT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
