"""`python -m bench`: the gateway against a naive relay and a direct connection to the scripted upstream.

Starts the scripted upstream (core 1), the naive relay and the gateway (core 0, one at
a time under load), and runs every scenario against each target, in both upstream
dialects for the streams: JSON (new and continuing conversations), SSE bulk, SSE paced,
the `jwk-token` authentication workload and the `quota` workload on gateways of their
own (bench/auth.py, bench/quota.py), then
the memory scenario on a fresh gateway. Prints a markdown report and writes it to
bench/results/latest.md. Exit status 0 when every target passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import procs, report, scenarios
from bench.cpu import wait_idle
from bench.engine import engine_scenario
from bench.memory import memory
from bench.report import Results
from bench.scenarios import DIALECTS, Settings, Target

RESULTS_DIR = Path(__file__).parent / "results"


WORKLOADS = ("json", "bulk", "paced", "closed", "memory", "jwk", "quota", "legacy", "engine", "metrics", "forms",
             "websocket", "lone")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run (default 5)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of direct, relay, gateway per scenario; medians are reported (default 3)")
    parser.add_argument("--metrics-calibration", action="store_true",
                        help="the metrics workload with metrics off on both gateways (the method's bias and spread)")
    parser.add_argument("--metrics-known-cost-us", type=float, default=0, metavar="US",
                        help="with --metrics-calibration: the \"on\" gateway spins US µs of CPU per request "
                             "(bench/spin.py), to check what the method reads for a known difference")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up seconds before each run (default 2)")
    parser.add_argument("--streams", type=int, default=1000, help="streams held open for the memory scenario")
    parser.add_argument("--paced-streams", type=int, default=256, help="streams per wave in the paced scenario")
    parser.add_argument("--only", default=",".join(WORKLOADS),
                        help=f"comma-separated subset of {','.join(WORKLOADS)} (default: all)")
    parser.add_argument("--dialects", default=",".join(DIALECTS), help="upstream dialects for the SSE scenarios")
    parser.add_argument("--profile", choices=("bulk", "paced"), action="append", default=[],
                        help="also profile a gateway with py-spy during an extra SSE run (repeatable)")
    parser.add_argument("--gateway-metrics", choices=("on", "off"), default="on",
                        help="service.metrics of the main scenarios' gateway (default on, as deployed): off "
                             "shows which targets hold without recording")
    parser.add_argument("--nginx", action="store_true",
                        help="also measure nginx as a plain proxy (installs Debian's nginx-light if missing)")
    parser.add_argument("--plain-upstream", action="store_true",
                        help="run `python -m gateway.devserver` as is (with its generation-2 GC pauses)")
    parser.add_argument("--placement", default="0:1", metavar="TARGET:LOAD",
                        help="CPU lists (as taskset -c takes them) for the target, and for the upstream, the load "
                             "generators and this orchestrator (default 0:1; on a larger host e.g. 0-1:2-5)")
    parser.add_argument("--gateway-workers", type=int, default=1, metavar="N",
                        help="service.workers of the main scenarios' gateway (default 1); its CPU is its "
                             "processes' together, on the target's cores")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "latest.md")
    return parser.parse_args(argv)


def _command_output(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, cwd=procs.ROOT, timeout=10)
        return (out.stdout or out.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def _header(settings: Settings, args: argparse.Namespace) -> dict[str, str]:
    commit = _command_output(["git", "rev-parse", "--short", "HEAD"])
    dirty = _command_output(["git", "status", "--porcelain", "--untracked-files=no", "--", "gateway", "bench"])
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    wrk_version = _command_output([settings.wrk, "-v"]).splitlines()[0].split(" [")[0]
    upstream = "`python -m gateway.devserver`" + ("" if args.plain_upstream else
                                                  " via `bench.upstream` (generation-2 GC off)")
    return {
        "when": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "commit": commit + (" (uncommitted changes)" if dirty else ""),
        "gateway": f"service.metrics {args.gateway_metrics}, service.workers {args.gateway_workers} "
                   "(the main scenarios' gateway)",
        "machine": f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}; {wrk_version}",
        "setup": f"the target (naive relay or gateway) pinned to core {procs.GATEWAY_CORE}; upstream ({upstream}, "
                 f"zero delay, --no-record), load generators and this orchestrator pinned to core {procs.LOAD_CORE}",
        "runs": f"{args.rounds} rounds of direct, {'nginx, ' if args.nginx else ''}relay, gateway per scenario; {settings.warmup} s warm-up + "
                f"{settings.seconds} s measured per run. JSON and SSE bulk: wrk, {settings.connections} connections; "
                f"SSE bulk streams have {scenarios.SSE_DELTAS} deltas written in one go. SSE paced: waves of "
                f"{settings.paced_streams} streams started at once, an event every {scenarios.PACED_DELAY_MS} ms "
                f"(each its own read)",
    }


async def run(args: argparse.Namespace, workdir: Path) -> tuple[str, list[report.Verdict]]:
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    dialects = [name.strip() for name in args.dialects.split(",") if name.strip()]
    settings = Settings(wrk=procs.ensure_debian_package("wrk", "wrk"), seconds=args.seconds, warmup=args.warmup,
                        memory_streams=args.streams, paced_streams=args.paced_streams)
    results = Results(header=_header(settings, args))
    print(f"bench: starting the scripted upstream (core {procs.LOAD_CORE}), the naive relay and the gateway "
          f"(core {procs.GATEWAY_CORE})", flush=True)
    upstream = procs.start_upstream(workdir, plain=args.plain_upstream)
    relay = gateway = nginx = None
    try:
        relay = procs.start_relay(workdir, upstream.url)
        recording = {"metrics": args.gateway_metrics == "on"}   # the main scenarios' and the memory scenario's
        gateway = procs.start_gateway(workdir, upstream.url, service=recording, workers=args.gateway_workers)
        await wait_idle([gateway])
        rss_idle = gateway.rss_kib()
        targets = [Target("direct", upstream), Target("relay", relay), Target("gateway", gateway)]
        if args.nginx:
            nginx = procs.start_nginx(workdir, upstream.url)
            targets.insert(1, Target("nginx", nginx))
        plan = []
        if "json" in wanted:
            plan.append(("JSON, new conversation", lambda t: scenarios.json_new(settings, t, upstream)))
            plan.append(("JSON, continuing", lambda t: scenarios.json_continue(
                settings, t, upstream, workdir, _rate(results, "JSON, new conversation", t.name))))
        for dialect in dialects:
            if "bulk" in wanted:
                plan.append((f"SSE bulk, {dialect}",
                             lambda t, d=dialect: scenarios.sse_bulk(settings, t, upstream, d)))
        for dialect in dialects:
            if "paced" in wanted:
                plan.append((f"SSE paced, {dialect}",
                             lambda t, d=dialect: scenarios.sse_paced(settings, t, upstream, d, workdir)))
        for dialect in dialects:
            if "closed" in wanted:
                plan.append((f"SSE paced closed loop, {dialect}",
                             lambda t, d=dialect: scenarios.sse_paced(settings, t, upstream, d, workdir, "closed")))
        for name, scenario in plan:
            runs = results.runs.setdefault(name, {})
            for round_ in range(args.rounds):
                for target in targets:
                    print(f"bench: {name}, {target.name}, round {round_ + 1}/{args.rounds}", flush=True)
                    runs.setdefault(target.name, []).append(await scenario(target))
        if plan:
            await asyncio.sleep(2)
            await wait_idle([gateway])
            results.rss_after_load = (rss_idle, gateway.rss_kib())
        for proc in (gateway, relay, nginx):  # the profiles and the memory scenario get fresh gateways
            if proc is not None:
                proc.stop()
        if "jwk" in wanted:
            from bench.auth import jwk_token
            results.auth = await jwk_token(settings, upstream, workdir, args.rounds)
        if "metrics" in wanted:
            from bench.metrics import metrics_workload
            results.metrics = await metrics_workload(settings, upstream, workdir, args.rounds,
                                                     calibration=args.metrics_calibration,
                                                     known_cost_us=args.metrics_known_cost_us)
        if "forms" in wanted:
            from bench.forms import forms_workload
            results.forms = await forms_workload(settings, upstream, workdir, args.rounds, dialects)
        if "quota" in wanted:
            from bench.quota import quota_workload
            results.quota = await quota_workload(settings, upstream, workdir, args.rounds)
        if "legacy" in wanted:
            from bench.legacy import legacy_workload
            results.legacy = await legacy_workload(settings, workdir, args.rounds, dialects)
        if "websocket" in wanted:
            from bench.websocket import websocket_workload
            results.websocket = await websocket_workload(upstream, workdir, args.rounds)
        if "lone" in wanted:
            from bench.lone import lone_workload
            results.lone = await lone_workload(settings, upstream, workdir, args.rounds, service=recording)
        for workload in args.profile:
            print(f"bench: profiling a gateway with py-spy during SSE {workload}", flush=True)
            from bench.profile import profile_sse
            profile = await profile_sse(settings, upstream, workdir, 10, args.output.parent, workload, dialects[-1])
            results.profile = (results.profile or "") + profile
        if "memory" in wanted:
            print(f"bench: memory, {settings.memory_streams} streams held open on a fresh gateway", flush=True)
            results.memory = await memory(settings.memory_streams, workdir, upstream, dialects[-1], service=recording)
        if "engine" in wanted:
            print("bench: local engine (its own upstream with 64-piece chat streams; Llama Stack if installed)",
                  flush=True)
            upstream.stop()  # the engine scenario starts its own, with --chat-deltas
            results.engine = await engine_scenario(settings, workdir, args.rounds)
    except Exception:
        for proc in (gateway, relay, nginx, upstream):
            if proc is not None:
                print(f"--- {proc.name} log (tail) ---\n{proc.log_tail()}", file=sys.stderr)
        raise
    finally:
        for proc in (gateway, relay, nginx, upstream):
            if proc is not None:
                proc.stop()
    return report.render(results)


def _rate(results: Results, name: str, target: str) -> float:
    """The new-conversation rate sizes the pools of pre-started conversations."""
    runs = results.runs.get(name, {}).get(target) or []
    return max((run.rate for run in runs), default=2000.0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    procs.set_placement(args.placement)
    procs.check_cores()
    procs.pin_self()
    limit = procs.raise_open_files()
    if "memory" in args.only and limit < 2 * args.streams + 512:
        sys.exit(f"bench: the open-files limit is {limit}; {args.streams} streams need about "
                 f"{2 * args.streams + 512} (raise the hard limit: ulimit -Hn)")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gateway-bench-") as tmp:
        text, verdicts = asyncio.run(run(args, Path(tmp)))
    args.output.write_text(text)
    print()
    print(text, end="")
    print(f"\nbench: written to {args.output}")
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
