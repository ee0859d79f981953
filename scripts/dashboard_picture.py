#!/usr/bin/env python3
"""Draw the dashboard's panels over a scripted workload: docs/img/dashboard.svg.

    .venv/bin/python scripts/dashboard_picture.py [--seconds 120] [--out docs/img/dashboard.svg]

Starts what tests/e2e/test_prometheus.py starts (a private PostgreSQL, the scripted
upstreams, MCP servers, three `gateway serve` and a real Prometheus scraping them every
second: scripts/postgres/setup.sh and scripts/prometheus/setup.sh first), runs the
workload of tests/support/metrics_workload.py, then asks Prometheus's range API for
every panel's queries in grafana/dashboards/gateway.json (the same substitution of
variables and interval macros as the test) and draws each panel as a small chart.

The picture is SVG written by hand (~100 lines below) rather than a PNG from matplotlib:
line charts need nothing more, GitHub renders SVG in Markdown, and the project gains no
dependency for one picture. Everything started is stopped at the end.
"""

from __future__ import annotations

import argparse
import html
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import prometheus as prom  # noqa: E402
from tests.support.gateway_proc import gateway_config, start_gateway, start_upstream  # noqa: E402
from tests.support.mcp_server import start_mcp_server  # noqa: E402
from tests.support.metrics_workload import MetricsStack  # noqa: E402
from tests.support.postgres import start_postgres  # noqa: E402

COLUMNS = 4
WIDTH, HEIGHT = 300, 190              # one panel
PLOT = (38, 30, 290, 128)             # the plot area inside a panel: x0, y0, x1, y1
COLORS = ("#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0")
LEGEND_LINES = 4


def number(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}" if value >= 0.001 or value == 0 else f"{value * 1000:.3g}m"


def legend_of(template: str, labels: dict[str, str]) -> str:
    text = template
    for name, value in labels.items():
        text = text.replace("{{" + name + "}}", value)
    return text.replace("{{", "").replace("}}", "") or ",".join(f"{k}={v}" for k, v in labels.items())


def draw_panel(title: str, unit: str, series: list[tuple[str, list[tuple[float, float]]]],
               start: float, end: float, left: int, top: int) -> list[str]:
    x0, y0, x1, y1 = PLOT
    out = [f'<g transform="translate({left},{top})">',
           f'<rect width="{WIDTH - 6}" height="{HEIGHT - 6}" fill="#181b1f" stroke="#2c3235"/>',
           f'<text x="8" y="18" fill="#d8d9da" font-size="12">{html.escape(title)}</text>']
    values = [value for _, points in series for _, value in points if math.isfinite(value)]
    top_value = max(values + [0.0]) or 1.0
    out.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#464c54"/>')
    out.append(f'<text x="{x0 - 4}" y="{y0 + 4}" fill="#8e8e8e" font-size="9" text-anchor="end">'
               f'{number(top_value)}{"s" if unit == "s" else ""}</text>')
    out.append(f'<text x="{x0 - 4}" y="{y1}" fill="#8e8e8e" font-size="9" text-anchor="end">0</text>')
    if not series:
        out.append(f'<text x="{(x0 + x1) // 2}" y="{(y0 + y1) // 2}" fill="#8e8e8e" font-size="11" '
                   'text-anchor="middle">no data</text>')
    for index, (name, points) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        runs: list[list[str]] = [[]]
        for at, value in points:
            if not math.isfinite(value):
                runs.append([])
                continue
            x = x0 + (at - start) / max(end - start, 1) * (x1 - x0)
            y = y1 - value / top_value * (y1 - y0)
            runs[-1].append(f"{x:.1f},{y:.1f}")
        for run in runs:
            if len(run) > 1:
                out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="1.3"/>')
        if index < LEGEND_LINES:
            label = name if len(name) <= 44 else name[:43] + "…"
            out.append(f'<rect x="8" y="{y1 + 9 + 12 * index}" width="8" height="3" fill="{color}"/>'
                       f'<text x="20" y="{y1 + 14 + 12 * index}" fill="#c7d0d9" font-size="9">{html.escape(label)}</text>')
    if len(series) > LEGEND_LINES:
        out.append(f'<text x="{WIDTH - 12}" y="{y1 + 14}" fill="#8e8e8e" font-size="9" text-anchor="end">'
                   f'+{len(series) - LEGEND_LINES} more</text>')
    out.append("</g>")
    return out


def render(charts: list[tuple[str, str, list]], start: float, end: float, title: str) -> str:
    rows = math.ceil(len(charts) / COLUMNS)
    width, height = COLUMNS * WIDTH + 6, rows * HEIGHT + 36
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="#111217"/>',
           f'<text x="8" y="22" fill="#d8d9da" font-size="15">{html.escape(title)}</text>']
    for index, (panel_title, unit, series) in enumerate(charts):
        out += draw_panel(panel_title, unit, series, start, end, 6 + (index % COLUMNS) * WIDTH,
                          32 + (index // COLUMNS) * HEIGHT)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def charts_of(server: prom.Prometheus, dashboard: dict, variables: dict[str, str], start: float, end: float,
              step: float) -> tuple[list[tuple[str, str, list]], list[str]]:
    charts, empty = [], []
    for panel in prom.panels(dashboard):
        series = []
        for target in panel.get("targets", []):
            expr = prom.substitute(target["expr"], variables)
            for result in server.query_range(expr, start, end, step):
                points = [(float(at), float(value)) for at, value in result["values"]]
                series.append((legend_of(target.get("legendFormat", ""), result["metric"]), points))
        if not series:
            empty.append(panel["title"])
        charts.append((panel["title"], panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""), series))
    return charts, empty


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120, help="how long the workload runs")
    parser.add_argument("--warmup", type=float, default=15,
                        help="seconds of workload before the drawn range (start-up's first slow requests)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.svg")
    args = parser.parse_args()
    if not prom.installed():
        print(f"Prometheus is not set up: run {prom.SETUP_SCRIPT}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="gateway-dashboard-"))
    stopping: list = []
    try:
        postgres = start_postgres(work / "postgres")
        stopping.append(postgres)
        upstream = start_upstream(work / "upstream")
        chat = start_upstream(work / "chat", "--no-responses")
        mcp = start_mcp_server(work / "mcp")
        faulty = start_mcp_server(work / "faulty", faulty=True)
        stopping += [upstream, chat, mcp, faulty]

        def start(upstream_url: str, **overrides):
            directory = work / f"gateway-{len(stopping)}"
            gateway = start_gateway(directory, gateway_config(upstream_url, directory / "unused.db", **overrides))
            stopping.append(gateway)
            return gateway

        stack = MetricsStack(start, upstream, chat, postgres, mcp, faulty)
        server = prom.start_prometheus(work / "prometheus", stack.targets())
        stopping.append(server)
        with stack.running(pause=0.5):
            time.sleep(args.warmup)
            began = time.time()
            time.sleep(args.seconds)
        ended = time.time()
        variables = {"instance": prom.instance_regex(stack.targets()), "datasource": "prometheus"}
        charts, empty = charts_of(server, prom.load_dashboard(), variables, began, ended, 2)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(render(charts, began, ended, f"Gateway dashboard: {len(charts)} panels over "
                                                         f"{args.seconds:.0f} s of tests/support/metrics_workload.py "
                                                         f"(after {args.warmup:.0f} s of warm-up)"))
        print(f"wrote {args.out} ({stack.rounds} workload rounds)")
        for message in sorted(set(stack.errors)):
            print(f"workload: {message}", file=sys.stderr)
        for title in empty:
            print(f"no data: {title}", file=sys.stderr)
        return 1 if empty or stack.errors else 0
    finally:
        for thing in reversed(stopping):
            thing.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
