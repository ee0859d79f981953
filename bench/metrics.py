"""The `metrics` workload: what recording metrics costs per turn.

Two gateways started alike but for `service.metrics` (on, off), on the gateway core,
measured in interleaved pairs: each round runs both, in alternating order (on/off, then
off/on), so the machine's drift falls on both alike. Scenarios: JSON with a new
conversation (scenario 1) and SSE bulk (scenario 2, Llama Stack's dialect). A
Prometheus-like scrape of the metrics-on gateway runs once a second during its runs,
as in production. Reported: CPU µs per turn (JSON) or per event (SSE) for each, and
the median of the per-round on/off ratios (target ≤ 1.03).
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench import procs, scenarios
from bench.report import Verdict
from bench.scenarios import Run, Settings, Target

MAX_RATIO = 1.03
VARIANTS = (("metrics on", True), ("metrics off", False))
SCENARIOS = ("JSON, new conversation", "SSE bulk, llama-stack")


@dataclass
class MetricsRuns:
    runs: dict[str, dict[str, list[Run]]] = field(default_factory=dict)   # scenario → variant → runs


async def _scraping(url: str, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            async with session.get(f"{url}/metrics") as reply:
                await reply.read()
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass


async def metrics_workload(settings: Settings, upstream: procs.Proc, workdir: Path, rounds: int) -> MetricsRuns:
    gateways: dict[str, procs.Proc] = {}
    results = MetricsRuns()
    try:
        for name, on in VARIANTS:
            gateways[name] = procs.start_gateway(workdir, upstream.url, name=f"gateway-metrics-{len(gateways)}",
                                                 service={"metrics": on})
        for round_ in range(rounds):
            order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
            for scenario in SCENARIOS:
                for name, on in order:
                    print(f"bench: metrics, {scenario}, {name}, round {round_ + 1}/{rounds}", flush=True)
                    target = Target("gateway", gateways[name])
                    stop = asyncio.Event()
                    scraper = asyncio.create_task(_scraping(gateways[name].url, stop)) if on else None
                    try:
                        if scenario.startswith("JSON"):
                            run = await scenarios.json_new(settings, target, upstream)
                        else:
                            run = await scenarios.sse_bulk(settings, target, upstream, "llama-stack")
                    finally:
                        stop.set()
                        if scraper is not None:
                            await scraper
                    if run.errors:
                        raise RuntimeError(f"metrics, {scenario}, {name}: {run.errors} requests failed")
                    results.runs.setdefault(scenario, {}).setdefault(name, []).append(run)
    finally:
        for proc in gateways.values():
            proc.stop()
    return results


def render(results: MetricsRuns, verdicts: list[Verdict]) -> list[str]:
    lines = ["## Metrics: `service.metrics` on against off (interleaved pairs, scraped every second)", "",
             "| scenario | CPU µs on | CPU µs off | on / off (median of rounds) | per-round ratios |",
             "|---|--:|--:|--:|---|"]
    for scenario, variants in results.runs.items():
        on, off = variants["metrics on"], variants["metrics off"]
        ratios = [a.cpu_us / b.cpu_us for a, b in zip(on, off)]
        ratio = statistics.median(ratios)
        lines.append(f"| {scenario} | {statistics.median(r.cpu_us for r in on):.1f} | "
                     f"{statistics.median(r.cpu_us for r in off):.1f} | {ratio:.3f} | "
                     f"{', '.join(f'{value:.3f}' for value in ratios)} |")
        verdicts.append(Verdict(f"metrics on ≤ {MAX_RATIO}× metrics off, CPU per unit ({scenario})",
                                ratio <= MAX_RATIO, f"{ratio:.3f}×"))
    return lines + [""]
