"""The `lone` workload: a JSON turn at low load against the same turn saturated.

Under load the gateway's steps share their wake-ups (a batch of turns per commit, many
reads per event-loop pass); a turn that arrives alone pays each of them itself: the
upstream conversation's creation, the upstream call, the record's commit. Here one
client sends scenario 1's request (a new conversation every time) one at a time, the
next `GAP` seconds after the previous answer, for `--seconds`; the target's CPU per turn
(from /proc, as every scenario) is set against its CPU per turn saturated (scenario 1,
wrk with 32 connections), measured just before in the same round. Both targets run: the
naive relay's ratio is what low load costs any process. Target: the gateway's lone
turn at most `MAX_RATIO` times its saturated turn (median of the rounds' ratios).
Counted instead: `python -m bench.callgrind --only json,lone`.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench import procs, scenarios
from bench.cpu import Meter, wait_idle
from bench.report import Verdict
from bench.scenarios import Run, Settings, Target, json_body

GAP = 0.040
MAX_RATIO = 1.5
TARGETS = ("relay", "gateway")


@dataclass
class LoneRuns:
    saturated: dict[str, list[Run]] = field(default_factory=dict)   # target → one run per round
    lone: dict[str, list[Run]] = field(default_factory=dict)


async def lone_turns(target: Target, upstream: procs.Proc, seconds: float) -> Run:
    """Turns one at a time, `GAP` apart, for `seconds`: the target's CPU per turn."""
    async with aiohttp.ClientSession() as session:
        async def turn() -> None:
            async with session.post(target.url, json=json_body()) as reply:
                assert reply.status == 200, await reply.text()
                await reply.read()
        for _ in range(5):   # the connection and the gateway warmed up
            await turn()
            await asyncio.sleep(GAP)
        await wait_idle([target.proc, upstream])
        count, latencies = 0, []
        async with Meter({"target": target.proc, "upstream": upstream}) as usage:
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                sent = time.perf_counter()
                await turn()
                latencies.append(1000 * (time.perf_counter() - sent))
                count += 1
                await asyncio.sleep(GAP)
    latencies.sort()
    return Run(target.name, count, usage.wall, usage.total("target"), checked=count,
               p50_ms=latencies[len(latencies) // 2], p90_ms=latencies[int(len(latencies) * 0.9)])


async def lone_workload(settings: Settings, upstream: procs.Proc, workdir: Path, rounds: int,
                        service: dict | None = None) -> LoneRuns:
    started: dict[str, procs.Proc] = {}
    results = LoneRuns()
    try:
        started["relay"] = procs.start_relay(workdir, upstream.url)
        started["gateway"] = procs.start_gateway(workdir, upstream.url, name="gateway-lone", service=service)
        for round_ in range(rounds):
            for name in TARGETS:
                target = Target(name, started[name])
                print(f"bench: lone, {name}, round {round_ + 1}/{rounds}", flush=True)
                results.saturated.setdefault(name, []).append(await scenarios.json_new(settings, target, upstream))
                results.lone.setdefault(name, []).append(await lone_turns(target, upstream, settings.seconds))
    finally:
        for proc in started.values():
            proc.stop()
    return results


def render(results: LoneRuns, verdicts: list[Verdict]) -> list[str]:
    lines = [f"## A lone JSON turn (one at a time, {GAP * 1000:.0f} ms apart) against the saturated one", "",
             "| target | CPU µs per turn, saturated | CPU µs per turn, lone | lone / saturated (median of rounds) "
             "| per-round ratios | lone latency p50 ms |", "|---|--:|--:|--:|---|--:|"]
    for name in TARGETS:
        saturated, lone = results.saturated.get(name), results.lone.get(name)
        if not saturated or not lone:
            continue
        ratios = [a.cpu_us / b.cpu_us for a, b in zip(lone, saturated)]
        ratio = statistics.median(ratios)
        lines.append(f"| {name} | {statistics.median(r.cpu_us for r in saturated):.0f} | "
                     f"{statistics.median(r.cpu_us for r in lone):.0f} | {ratio:.2f}× | "
                     f"{', '.join(f'{value:.2f}' for value in ratios)} | "
                     f"{statistics.median(r.p50_ms or 0 for r in lone):.2f} |")
        if name == "gateway":
            verdicts.append(Verdict(f"a lone JSON turn ≤ {MAX_RATIO}× the saturated turn's CPU", ratio <= MAX_RATIO,
                                    f"{ratio:.2f}×"))
    return lines + [""]
