"""Turn the runs into the markdown report (printed and written to bench/results/latest.md)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from bench import procs
from bench.memory import MemoryRun
from bench.scenarios import Run

TARGETS = ("direct", "nginx", "relay", "gateway")  # nginx only with --nginx
# The targets, on the gateway's figure over the naive relay's in the same run.
CPU_MAX_RATIO = {"JSON, new conversation": 1.5, "JSON, continuing": 1.0,
                 "SSE bulk, llama-stack": 0.75, "SSE bulk, openai": 0.75,
                 "SSE paced, llama-stack": 1.0, "SSE paced, openai": 1.0,
                 "SSE paced closed loop, llama-stack": 1.0, "SSE paced closed loop, openai": 1.0}
TTFE_MAX_RATIO = 1.5          # SSE paced (a burst, and a closed loop), time to first event p50 (issue 43)
MEMORY_MAX_KIB = 24.0         # per open stream, 1000 held on a fresh gateway
MEMORY_RETURN_MAX_MIB = 8.0   # RSS after the held streams closed, over the RSS before


@dataclass
class Results:
    header: dict[str, str]
    runs: dict[str, dict[str, list[Run]]] = field(default_factory=dict)  # scenario -> target -> a run per round
    memory: MemoryRun | None = None
    rss_after_load: tuple[int, int] | None = None  # main gateway: KiB idle at start, idle after every scenario
    profile: str | None = None
    auth: Any = None  # bench.auth.AuthRuns (the `jwk` workload)
    engine: tuple[list[str], list[tuple[str, bool, str]]] | None = None  # bench/engine.py: rows, verdicts
    quota: Any = None  # bench.quota.QuotaRuns (the `quota` workload)
    legacy: Any = None  # bench.legacy.LegacyRuns (the `legacy` workload)
    metrics: Any = None  # bench.metrics.MetricsRuns (the `metrics` workload)
    forms: Any = None  # bench.forms.FormRuns (the `forms` workload)
    websocket: Any = None  # bench.websocket.WebSocketRuns (the `websocket` workload)
    lone: Any = None  # bench.lone.LoneRuns (the `lone` workload)


@dataclass
class Verdict:
    name: str
    ok: bool
    detail: str


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ratios(runs: dict[str, list[Run]], value) -> list[float]:
    """gateway / relay in each round (the two ran back to back on the same machine state)."""
    return [value(g) / value(r) for g, r in zip(runs.get("gateway", []), runs.get("relay", []))
            if value(g) is not None and value(r)]


def _num(value: float | None, digits: int = 0, unit: str = "") -> str:
    return "—" if value is None else f"{value:,.{digits}f}{unit}"


def _pass(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def _targets(results: Results) -> list[str]:
    present = {target for runs in results.runs.values() for target in runs}
    return [target for target in TARGETS if target in present or target != "nginx"]


def _scenario_rows(name: str, runs: dict[str, list[Run]], verdicts: list[Verdict], targets: list[str]) -> list[str]:
    unit = "request" if name.startswith("JSON") else "event"
    rows = []

    def row(metric: str, value, digits: int, suffix: str = "", check: tuple[str, float] | None = None) -> None:
        cells = [_num(_median([value(run) for run in runs.get(t, [])]), digits, suffix) for t in targets]
        ratios = _ratios(runs, value)
        ratio = _median(ratios)
        target = result = ""
        if check is not None:
            label, maximum = check
            ok = ratio is not None and ratio <= maximum
            target, result = f"≤ {maximum:g}× relay", _pass(ok)
            verdicts.append(Verdict(f"{name}: {label} ≤ {maximum:g}× the naive relay's", ok,
                                    f"{_num(ratio, 2)}× (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"))
        label = name if not rows else ""
        rows.append(f"| {label} | {metric} | {' | '.join(cells)} | {_num(ratio, 2, '×')} | {target} | {result} |")

    row(f"CPU per {unit}, µs", lambda run: run.cpu_us, 1 if unit == "event" else 0,
        check=(f"CPU per {unit}", CPU_MAX_RATIO[name]))
    row(f"{unit}s/s", lambda run: run.rate, 0)
    if name.startswith("JSON"):
        row("latency p50, ms", lambda run: run.p50_ms, 1)
    elif name.startswith("SSE paced"):
        row("time to first event p50, ms", lambda run: run.p50_ms, 1, check=("time to first event p50", TTFE_MAX_RATIO))
        row("time to first event p90, ms", lambda run: run.p90_ms, 1)
        if name.startswith("SSE paced closed loop"):
            row("the opening burst's time to first event p50, ms", lambda run: run.burst_p50_ms, 1,
                check=("the opening burst's time to first event p50", TTFE_MAX_RATIO))
    else:
        row("time to first event p50 (probe), ms", lambda run: run.p50_ms, 1)
    errors = [f"{sum(r.errors for r in runs.get(t, []))} of {sum(r.checked for r in runs.get(t, []))}" for t in targets]
    rows.append(f"| | errors (of checked {'requests' if unit == 'request' else 'streams'}) | {' | '.join(errors)} "
                f"| | | |")
    return rows


def _memory_rows(run: MemoryRun, verdicts: list[Verdict], blank: str) -> list[str]:
    ok = run.kib_per_stream <= MEMORY_MAX_KIB and run.opened == run.streams and run.still_open == run.streams
    verdicts.append(Verdict(f"≤ {MEMORY_MAX_KIB:g} KiB per open stream ({run.streams} on a fresh gateway)", ok,
                            f"{run.kib_per_stream:.1f} KiB ({run.opened}/{run.streams} open)"))
    returned = (run.rss_after_kib - run.rss_before_kib) / 1024
    back = returned <= MEMORY_RETURN_MAX_MIB
    verdicts.append(Verdict(f"RSS back within {MEMORY_RETURN_MAX_MIB:g} MiB of idle once the streams closed", back,
                            f"{returned:+.1f} MiB"))
    mib = lambda kib: f"{kib / 1024:.1f}"  # noqa: E731
    return [
        f"| Memory, {run.streams} slow streams held | KiB per open stream | {blank}{run.kib_per_stream:.1f} | | "
        f"≤ {MEMORY_MAX_KIB:g} | {_pass(ok)} |",
        f"| | RSS MiB: fresh → warmed up → all open → {run.streams} closed | {blank}{mib(run.rss_fresh_kib)} → "
        f"{mib(run.rss_before_kib)} → {mib(run.rss_open_kib)} → {mib(run.rss_after_kib)} | | "
        f"back ≤ +{MEMORY_RETURN_MAX_MIB:g} | {_pass(back)} |",
        f"| | streams open / failed / ended early | {blank}{run.opened} / {run.failed} / "
        f"{run.streams - run.still_open} (opened in {run.open_seconds:.1f} s) | | | |",
    ]


def _cpu_table(results: Results) -> list[str]:
    target, load = f"core {procs.GATEWAY_CORE}", f"core {procs.LOAD_CORE}"
    rows = [f"| scenario, target | target ({target}) | upstream ({load}) | load generator ({load}) | "
            f"bench ({load}) |", "|---|--:|--:|--:|--:|"]
    for name, runs in results.runs.items():
        for target in _targets(results):
            for index, run in enumerate(runs.get(target, [])):
                pct = run.cpu_pct
                own = "—" if target == "direct" else f"{pct['target']:.0f} %"
                rows.append(f"| {name}, {target} #{index + 1} | {own} | {pct['upstream']:.0f} % "
                            f"| {pct['load']:.0f} % | {pct['bench']:.0f} % |")
    return rows


def render(results: Results) -> tuple[str, list[Verdict]]:
    verdicts: list[Verdict] = []
    lines = ["# Gateway benchmark", ""]
    lines += [f"- **{key}**: {value}" for key, value in results.header.items()]
    targets = _targets(results)
    names = {"direct": "direct", "nginx": "nginx", "relay": "naive relay", "gateway": "gateway"}
    blank = "| " * (len(targets) - 1)
    lines += ["", "Medians over the rounds; *gateway / relay* is the median of each round's ratio (the "
              "two ran back to back). CPU is the target's own (the upstream's for *direct*), from "
              "`/proc/<pid>/stat`, including the work it finished after the run.", "",
              f"| scenario | metric | {' | '.join(names[t] for t in targets)} | gateway / relay | target | result |",
              "|---|---|" + "--:|" * len(targets) + "--:|---|---|"]
    for name, runs in results.runs.items():
        lines += _scenario_rows(name, runs, verdicts, targets)
    if results.memory:
        lines += _memory_rows(results.memory, verdicts, blank)
    if results.rss_after_load:
        idle, after = results.rss_after_load
        lines += [f"| Memory after the load | gateway RSS MiB: idle at start → idle after every scenario above "
                  f"| {blank}{idle / 1024:.1f} → {after / 1024:.1f} | | | |"]
    if results.auth is not None:
        from bench.auth import render as render_auth

        lines += [""] + render_auth(results.auth, verdicts)
    if results.metrics is not None:
        from bench.metrics import render as render_metrics

        lines += [""] + render_metrics(results.metrics, verdicts)
    if results.forms is not None:
        from bench.forms import render as render_forms

        lines += [""] + render_forms(results.forms, verdicts)
    if results.quota is not None:
        from bench.quota import render as render_quota

        lines += [""] + render_quota(results.quota, verdicts)
    if results.legacy is not None:
        from bench.legacy import render as render_legacy

        lines += [""] + render_legacy(results.legacy, verdicts)
    if results.websocket is not None:
        from bench.websocket import render as render_websocket

        lines += [""] + render_websocket(results.websocket, verdicts)
    if results.lone is not None:
        from bench.lone import render as render_lone

        lines += [""] + render_lone(results.lone, verdicts)
    if results.engine:
        rows, engine_verdicts = results.engine
        lines += rows
        verdicts += [Verdict(name, ok, detail) for name, ok, detail in engine_verdicts]
    lines += ["", "## Targets", ""] + [f"- {_pass(v.ok)} {v.name}: {v.detail}" for v in verdicts]
    lines += ["", f"{sum(v.ok for v in verdicts)} of {len(verdicts)} targets pass.", ""]
    disturbed = [f"{name}, {run.target}: {problem}" for name, runs in results.runs.items()
                 for target_runs in runs.values() for run in target_runs for problem in run.disturbed]
    notes = [f"{name}, {run.target}: {note}" for name, runs in results.runs.items()
             for target_runs in runs.values() for run in target_runs for note in run.notes]
    if disturbed or notes:
        lines += ["## Notes", ""]
        lines += [f"- **disturbed** ({d}): something else ran on the machine; rerun on a quiet one" for d in disturbed]
        lines += [f"- {note}" for note in notes] + [""]
    lines += ["## CPU during the measured runs (% of one core)", ""] + _cpu_table(results)
    if results.profile:
        lines += ["", results.profile]
    return "\n".join(lines) + "\n", verdicts
