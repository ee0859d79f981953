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
# Paced: each wrk connection waits this long after each answer before its next request,
# so both gateways get the same, steady offered load (~380 turns or ~190 streams a second
# each, about a third of the core they share) instead of all they can take.
PACE_MS = {"JSON, new conversation": 80, "SSE bulk, llama-stack": 160}
LOADS = ("saturated", "paced")


@dataclass
class MetricsRuns:
    runs: dict[str, dict[str, dict[str, list[Run]]]] = field(default_factory=dict)   # load → scenario → variant → runs
    calibration: bool = False   # both gateways had metrics off: what the method reads for no difference
    known_cost_us: float = 0    # calibration: the "on" gateway spun this much CPU per request (bench/spin.py)


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
                        scenario: str, load: str) -> dict[str, Run]:
    """Both gateways loaded at once, each by its own wrk, over the same seconds: the
    machine's speed, which drifts by several per cent from one run to the next here, is
    the same for both, so their CPU per unit compares directly. `load`: `saturated`
    (each wrk sends all its gateway takes) or `paced` (`PACE_MS` between a connection's
    answer and its next request, measured twice as long: fewer turns a second)."""
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
    seconds = settings.seconds
    if load == "paced":
        script += f"\nfunction delay()\n   return {PACE_MS[scenario]}\nend\n"
        seconds *= 2

    async def run(seconds: int) -> list[loadgen.WrkResult]:
        return await asyncio.gather(*(loadgen.run_wrk(settings.wrk, url, script, connections=settings.connections,
                                                      seconds=seconds) for url in urls.values()))

    await run(settings.warmup)
    await wait_idle([*gateways.values(), upstream])
    async with Meter(dict(gateways)) as usage:
        stop = asyncio.Event()
        scraper = asyncio.create_task(_scraping(gateways[VARIANTS[0][0]].url, stop))   # the one with metrics on
        try:
            results = await run(seconds)
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
                           calibration: bool = False, known_cost_us: float = 0) -> MetricsRuns:
    """`calibration`: both gateways with metrics off, the same workload: the ratio the
    method reads when there is no difference (its bias and spread), or, with
    `known_cost_us`, when the "on" one spends that much more CPU per request (its gain)."""
    results = MetricsRuns(calibration=calibration, known_cost_us=known_cost_us if calibration else 0)
    for round_ in range(rounds):
        # A new pair each round, started in alternating order: two processes of the same
        # code differ by a few per cent from their memory layout alone (hash seeds,
        # addresses), a difference the median over rounds must not inherit from one pair.
        order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
        gateways: dict[str, procs.Proc] = {}
        try:
            for name, on in order:
                gateways[name] = procs.start_gateway(workdir, upstream.url, name=f"gateway-metrics-{round_}-{len(gateways)}",
                                                     service={"metrics": on and not calibration},
                                                     spin_us=results.known_cost_us if on else 0)
            gateways = {name: gateways[name] for name, _ in VARIANTS}
            for load in LOADS:
                for scenario in SCENARIOS:
                    print(f"bench: metrics, {scenario}, {load}, on and off side by side, round {round_ + 1}/{rounds}",
                          flush=True)
                    runs = await _side_by_side(settings, gateways, upstream, scenario, load)
                    for name, run in runs.items():
                        if run.errors:
                            raise RuntimeError(f"metrics, {scenario}, {load}, {name}: {run.errors} requests failed")
                        results.runs.setdefault(load, {}).setdefault(scenario, {}).setdefault(name, []).append(run)
        finally:
            for proc in gateways.values():
                proc.stop()
    return results


def render(results: MetricsRuns, verdicts: list[Verdict]) -> list[str]:
    heading = "## Metrics: `service.metrics` on against off (side by side, a new pair each round, scraped every second)"
    if results.calibration:
        heading = "## Metrics, calibration: both gateways with metrics off (side by side, a new pair each round)"
        if results.known_cost_us:
            heading += f"; the \"on\" one spins {results.known_cost_us:g} µs of CPU per request (bench/spin.py)"
    lines = [heading, "",
             "| load | scenario | CPU µs on | CPU µs off | turns or events /s on | on / off (median of rounds) | "
             "per-round ratios |",
             "|---|---|--:|--:|--:|--:|---|"]
    for load, scenarios_ in results.runs.items():
        for scenario, variants in scenarios_.items():
            on, off = variants["metrics on"], variants["metrics off"]
            ratios = [a.cpu_us / b.cpu_us for a, b in zip(on, off)]
            ratio = statistics.median(ratios)
            lines.append(f"| {load} | {scenario} | {statistics.median(r.cpu_us for r in on):.1f} | "
                         f"{statistics.median(r.cpu_us for r in off):.1f} | "
                         f"{statistics.median(r.count / r.seconds for r in on):.0f} | {ratio:.3f} | "
                         f"{', '.join(f'{value:.3f}' for value in ratios)} |")
            # Both loads are held to the target, though each reads a known extra cost more
            # than once over (`--metrics-known-cost-us`; bench/README.md, "Metrics").
            if not results.calibration:
                verdicts.append(Verdict(f"metrics on ≤ {MAX_RATIO}× metrics off, CPU per unit ({scenario}, {load})",
                                        ratio <= MAX_RATIO, f"{ratio:.3f}×"))
    return lines + [""]
