"""`python -m bench`: the gateway against a direct connection to the scripted upstream.

Starts the scripted upstream (core 1) and the gateway (core 0), runs the JSON, SSE and
memory scenarios with wrk (core 1), prints a markdown table and writes it to
bench/results/latest.md. Exit status 0 when every target passes, 1 otherwise.
"""

from __future__ import annotations

from typing import Awaitable, Callable, TypeVar

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
from bench.report import Results
from bench.scenarios import Settings, Target

RESULTS_DIR = Path(__file__).parent / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per run (default 5)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="direct/gateway pairs per scenario; the median ratio is reported (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up seconds before each run (default 2)")
    parser.add_argument("--streams", type=int, default=1000, help="streams held open for the memory scenario")
    parser.add_argument("--only", default="json,sse,memory",
                        help="comma-separated subset of json,sse,memory (default: all)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile the gateway with py-spy during an extra SSE run")
    parser.add_argument("--plain-upstream", action="store_true",
                        help="run `python -m gateway.devserver` as is (with its generation-2 GC pauses)")
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
    dirty = _command_output(["git", "status", "--porcelain", "--untracked-files=no", "--", "gateway"])
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    wrk_version = _command_output([settings.wrk, "-v"]).splitlines()[0].split(" [")[0]
    upstream = "`python -m gateway.devserver`" + ("" if args.plain_upstream else
                                                  " via `bench.upstream` (generation-2 GC off)")
    return {
        "when": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "commit": commit + (" (gateway/ has uncommitted changes)" if dirty else ""),
        "machine": f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}; {wrk_version}",
        "setup": f"gateway pinned to core {procs.GATEWAY_CORE}; upstream ({upstream}, zero delay, --no-record), "
                 f"wrk (1 thread) and the probe client pinned to core {procs.LOAD_CORE}",
        "runs": f"{settings.connections} connections, {settings.warmup} s warm-up + {settings.seconds} s measured "
                f"per run; direct = the same requests straight to the upstream",
    }


Run = TypeVar("Run")


async def run(args: argparse.Namespace, workdir: Path) -> tuple[str, list[report.Verdict]]:
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    settings = Settings(wrk=procs.ensure_debian_package("wrk", "wrk"), seconds=args.seconds,
                        warmup=args.warmup, memory_streams=args.streams)
    results = Results(header=_header(settings, args))
    print("bench: starting the scripted upstream (core 1) and the gateway (core 0)", flush=True)
    upstream = procs.start_upstream(workdir, plain=args.plain_upstream)
    gateway = None
    try:
        gateway = procs.start_gateway(workdir, upstream.url)
        watched = {"gateway": gateway, "upstream": upstream}
        direct, through = Target("direct", upstream), Target("gateway", gateway)
        if "json" in wanted:
            print("bench: scenario 1, JSON, new conversation per request", flush=True)
            results.json_new = await _paired(
                args.rounds, lambda: scenarios.json_new(settings, direct, watched),
                lambda: scenarios.json_new(settings, through, watched),
                lambda run: run.sustained_rps, results.rounds, "JSON, new conversation")
            print("bench: scenario 1, JSON, continuing conversations", flush=True)
            # The new-conversation rates size the pools of pre-started conversations.
            results.json_continue = await _paired(
                args.rounds,
                lambda: scenarios.json_continue(settings, direct, watched, workdir, results.json_new[0].rps),
                lambda: scenarios.json_continue(settings, through, watched, workdir, results.json_new[1].rps),
                lambda run: run.sustained_rps, results.rounds, "JSON, continuing conversations")
        if "sse" in wanted:
            print("bench: scenario 2, SSE", flush=True)
            results.sse = await _paired(
                args.rounds, lambda: scenarios.sse(settings, direct, watched),
                lambda: scenarios.sse(settings, through, watched),
                lambda run: run.sustained_events_per_s, results.rounds, "SSE")
        gateway.stop()  # the profile and the memory scenario get fresh gateways
        if args.profile:
            print("bench: profiling a gateway with py-spy during an extra SSE run", flush=True)
            from bench.profile import profile_sse
            results.profile = await profile_sse(settings, upstream, workdir, 10, args.output.parent)
        if "memory" in wanted:
            print(f"bench: scenario 3, {settings.memory_streams} streams held open", flush=True)
            results.memory = await scenarios.memory(settings, workdir, upstream)
    except Exception:
        for proc in (gateway, upstream):
            if proc is not None:
                print(f"--- {proc.name} log (tail) ---\n{proc.log_tail()}", file=sys.stderr)
        raise
    finally:
        if gateway is not None:
            gateway.stop()
        upstream.stop()
    return report.render(results)


async def _paired(rounds: int, direct: Callable[[], Awaitable[Run]], gateway: Callable[[], Awaitable[Run]],
                  rate: Callable[[Run], float], log: dict[str, list[float]], name: str) -> tuple[Run, Run]:
    """Alternate direct and gateway runs and keep the pair with the median ratio.

    This machine's speed drifts by tens of percent from one minute to the next, and
    it moves both sides; a direct run and a gateway run measured back to back see the
    same machine, so their ratio is what is compared, and the median of several such
    pairs is what is reported."""
    pairs = []
    for _ in range(rounds):
        pairs.append((await direct(), await gateway()))
    ratios = [rate(g) / rate(d) if rate(d) else 0.0 for d, g in pairs]
    log[name] = ratios
    middle = sorted(range(len(pairs)), key=lambda index: ratios[index])[len(pairs) // 2]
    return pairs[middle]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
