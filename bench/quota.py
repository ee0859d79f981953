"""The `quota` workload: what token quotas cost per turn.

JSON (a new conversation each request, as scenario 1) and SSE bulk (scenario 2, Llama
Stack's dialect) against gateways started alike for this workload, round after round:
without limiters, and with a user limiter and a cluster limiter on the turn database
(every request is one user, so both balances are hot rows); the same two on a private
PostgreSQL (`tests/support/postgres.py`; skipped with a note when it is not installed).
Reported: CPU µs per request or per event for each, and the rate per CPU second with
limiters over the rate without (target ≥ 0.9×, per engine).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procs, scenarios
from bench.report import Verdict
from bench.scenarios import Run, Settings, Target

MIN_RATIO = 0.9
DIALECT = "llama-stack"
LIMITERS = [
    {"name": "daily", "type": "user_limiter", "initial_quota": 10 ** 15, "quota_increase": 10 ** 9,
     "period": "1 day"},
    {"name": "cluster", "type": "cluster_limiter", "initial_quota": 10 ** 15, "quota_increase": 0,
     "period": "1 month"},
]
WORKLOADS = ("JSON", "SSE bulk")


@dataclass
class QuotaRuns:
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)   # (variant, workload) -> runs
    notes: list[str] = field(default_factory=list)


def _variants(workdir: Path) -> tuple[list[tuple[str, dict[str, Any]]], Any, list[str]]:
    """(name, config keys) per gateway, each on a database of its own, and the
    PostgreSQL server when there is one."""
    def pair(engine: str, none: dict[str, Any], limited: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [(f"none, {engine}", {"database": none}),
                (f"limiters, {engine}", {"database": limited, "quota_handlers": {**limited, "limiters": LIMITERS}})]

    variants = pair("SQLite", {"sqlite": {"db_path": str(workdir / "quota-none.db")}},
                    {"sqlite": {"db_path": str(workdir / "quota-limiters.db")}})
    from tests.support import postgres as pg

    if not pg.installed():
        return variants, None, [f"PostgreSQL variants skipped: not installed (run {pg.SETUP_SCRIPT})"]
    # On the load core, as the upstream: a peer must not share the measured gateway's core.
    server = pg.start_postgres(workdir / "quota-postgres", core=procs.LOAD_CORE)
    variants += pair("PostgreSQL", {"postgres": server.new_database()}, {"postgres": server.new_database()})
    return variants, server, []


async def quota_workload(settings: Settings, upstream: procs.Proc, workdir: Path, rounds: int) -> QuotaRuns:
    results = QuotaRuns()
    variants, server, results.notes = _variants(workdir)
    gateways: dict[str, procs.Proc] = {}
    try:
        for name, extra in variants:
            gateways[name] = procs.start_gateway(workdir, upstream.url, name=f"gateway-quota-{len(gateways)}",
                                                 extra=extra)
        for round_ in range(rounds):
            # none, limiters in one round, limiters, none in the next: a drift of the
            # machine during a round does not favour one of them.
            for name, _ in (variants if round_ % 2 == 0 else _swapped(variants)):
                target = Target("gateway", gateways[name])
                for workload in WORKLOADS:
                    print(f"bench: quota, {name}, {workload}, round {round_ + 1}/{rounds}", flush=True)
                    run = await (scenarios.json_new(settings, target, upstream) if workload == "JSON"
                                 else scenarios.sse_bulk(settings, target, upstream, DIALECT))
                    if run.errors:
                        raise RuntimeError(f"quota, {name}, {workload}: {run.errors} requests failed")
                    results.runs.setdefault((name, workload), []).append(run)
    finally:
        for proc in gateways.values():
            proc.stop()
        if server is not None:
            server.stop()
    return results


def _swapped(variants: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Each engine's pair (none, limiters) in the other order."""
    return [variant for index in range(0, len(variants), 2) for variant in reversed(variants[index:index + 2])]


def render(results: QuotaRuns, verdicts: list[Verdict]) -> list[str]:
    def median_cpu(key: tuple[str, str]) -> float:
        return statistics.median(run.cpu_us for run in results.runs[key])

    def ratio(engine: str, workload: str) -> float:
        """The median of the per-round ratios: each round's two runs ran back to back,
        on the same machine state, as bench/README.md says of every other ratio."""
        nones, limited = results.runs[(f"none, {engine}", workload)], results.runs[(f"limiters, {engine}", workload)]
        return statistics.median(none.cpu_us / run.cpu_us for none, run in zip(nones, limited))

    lines = ["## Quotas: a user limiter and a cluster limiter against none "
             f"(JSON new conversation; SSE bulk, {DIALECT})", "",
             "| gateway | workload | CPU µs per request or event: median (each round) | rate/s "
             "| rate per CPU second / none's (median of the rounds' ratios) |",
             "|---|---|--:|--:|--:|"]
    for (name, workload), runs in results.runs.items():
        cpu = median_cpu((name, workload))
        rate = statistics.median(run.rate for run in runs)
        engine = name.split(", ")[1]
        limited = name.startswith("limiters")
        shown = ratio(engine, workload) if limited else 1.0
        each = ", ".join(f"{run.cpu_us:.1f}" for run in runs)
        lines.append(f"| {name} | {workload} | {cpu:.1f} ({each}) | {rate:,.0f} | "
                     f"{f'{shown:.2f}×' if limited else '—'} |")
        if limited:
            verdicts.append(Verdict(f"quota, {engine}, {workload}: ≥ {MIN_RATIO}× none's rate per CPU second",
                                    shown >= MIN_RATIO, f"{shown:.2f}×"))
    return lines + [""] + [f"- {note}" for note in results.notes] + ([""] if results.notes else [])
