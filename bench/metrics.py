"""The `metrics` workload: what recording metrics costs per turn.

Two gateways started alike but for `service.metrics` (on, off), on the gateway core,
measured in pairs: each round starts a new pair and loads both at once, each with its
own wrk, over the same seconds, so the machine's drift (several per cent between two
runs a few seconds apart here, more than the 3 % to show) falls on both alike, and no
one pair's layout decides the median. Scenarios: JSON with a new conversation
(scenario 1) and SSE bulk (scenario 2, Llama Stack's dialect). A
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

import orjson

from bench import loadgen, procs, scenarios
from bench.cpu import Meter, wait_idle
from bench.report import Verdict
from bench.scenarios import Run, Settings, Target

MAX_RATIO = 1.03
VARIANTS = (("metrics on", True), ("metrics off", False))
SCENARIOS = ("JSON, new conversation", "SSE bulk, llama-stack")


@dataclass
class MetricsRuns:
    runs: dict[str, dict[str, list[Run]]] = field(default_factory=dict)   # scenario → variant → runs
    calibration: bool = False   # both gateways had metrics off: what the method reads for no difference


async def _scraping(url: str, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            async with session.get(f"{url}/metrics") as reply:
                await reply.read()
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass


async def _side_by_side(settings: Settings, gateways: dict[str, procs.Proc], upstream: procs.Proc,
                        scenario: str) -> dict[str, Run]:
    """Both gateways loaded at once, each by its own wrk, over the same seconds: the
    machine's speed, which drifts by several per cent from one run to the next here, is
    the same for both, so their CPU per unit compares directly."""
    on_target = Target("gateway", gateways[VARIANTS[0][0]])
    if scenario.startswith("JSON"):
        script = loadgen.render("json", {"PATH": scenarios.PATH, "BODY": orjson.dumps(scenarios.json_body()).decode(),
                                         "AUTHORIZATION": ""})
    else:
        body = scenarios.sse_body("llama-stack")
        events = await scenarios.check_stream(on_target, body)
        script = loadgen.render("sse", {"PATH": scenarios.PATH, "BODY": orjson.dumps(body).decode(),
                                        "EXPECTED": events, "EXPECT_DONE": True})
    urls = {name: Target("gateway", proc).url for name, proc in gateways.items()}

    async def load(seconds: int) -> list[loadgen.WrkResult]:
        return await asyncio.gather(*(loadgen.run_wrk(settings.wrk, url, script, connections=settings.connections,
                                                      seconds=seconds) for url in urls.values()))

    await load(settings.warmup)
    await wait_idle([*gateways.values(), upstream])
    async with Meter(dict(gateways)) as usage:
        stop = asyncio.Event()
        scraper = asyncio.create_task(_scraping(gateways[VARIANTS[0][0]].url, stop))   # the one with metrics on
        try:
            results = await load(settings.seconds)
        finally:
            stop.set()
            await scraper
    runs = {}
    for (name, proc), result in zip(gateways.items(), results):
        counters = result.counters
        count = result.requests if scenario.startswith("JSON") else counters.get("events", 0)
        errors = result.error_count + counters.get("bad_body", 0) + counters.get("bad_status", 0)
        runs[name] = Run("gateway", count, result.duration_s, usage.total(name), errors=errors, checked=result.requests)
    return runs


async def metrics_workload(settings: Settings, upstream: procs.Proc, workdir: Path, rounds: int,
                           calibration: bool = False) -> MetricsRuns:
    """`calibration`: both gateways with metrics off, the same workload: the ratio the
    method reads when there is no difference (its bias and spread)."""
    results = MetricsRuns(calibration=calibration)
    for round_ in range(rounds):
        # A new pair each round, started in alternating order: two processes of the same
        # code differ by a few per cent from their memory layout alone (hash seeds,
        # addresses), a difference the median over rounds must not inherit from one pair.
        order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
        gateways: dict[str, procs.Proc] = {}
        try:
            for name, on in order:
                gateways[name] = procs.start_gateway(workdir, upstream.url, name=f"gateway-metrics-{round_}-{len(gateways)}",
                                                     service={"metrics": on and not calibration})
            gateways = {name: gateways[name] for name, _ in VARIANTS}
            for scenario in SCENARIOS:
                print(f"bench: metrics, {scenario}, on and off side by side, round {round_ + 1}/{rounds}", flush=True)
                runs = await _side_by_side(settings, gateways, upstream, scenario)
                for name, run in runs.items():
                    if run.errors:
                        raise RuntimeError(f"metrics, {scenario}, {name}: {run.errors} requests failed")
                    results.runs.setdefault(scenario, {}).setdefault(name, []).append(run)
        finally:
            for proc in gateways.values():
                proc.stop()
    return results


def render(results: MetricsRuns, verdicts: list[Verdict]) -> list[str]:
    heading = "## Metrics: `service.metrics` on against off (side by side, a new pair each round, scraped every second)"
    if results.calibration:
        heading = "## Metrics, calibration: both gateways with metrics off (side by side, a new pair each round)"
    lines = [heading, "",
             "| scenario | CPU µs on | CPU µs off | on / off (median of rounds) | per-round ratios |",
             "|---|--:|--:|--:|---|"]
    for scenario, variants in results.runs.items():
        on, off = variants["metrics on"], variants["metrics off"]
        ratios = [a.cpu_us / b.cpu_us for a, b in zip(on, off)]
        ratio = statistics.median(ratios)
        lines.append(f"| {scenario} | {statistics.median(r.cpu_us for r in on):.1f} | "
                     f"{statistics.median(r.cpu_us for r in off):.1f} | {ratio:.3f} | "
                     f"{', '.join(f'{value:.3f}' for value in ratios)} |")
        if not results.calibration:
            verdicts.append(Verdict(f"metrics on ≤ {MAX_RATIO}× metrics off, CPU per unit ({scenario})",
                                    ratio <= MAX_RATIO, f"{ratio:.3f}×"))
    return lines + [""]
