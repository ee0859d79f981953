"""`bench/run --profile`: where the gateway's CPU goes while it relays SSE.

After the measured runs, a gateway of its own (through `bench.gcstats`, which times its
garbage collections) gets a warm-up and then an SSE workload again (bulk, or paced:
256 streams starting at once, an event every 20 ms), with py-spy attached for 10 s. py-spy samples only the thread holding the GIL (`--gil`): the
SQLite worker thread blocks in `queue.get()` in a way py-spy does not recognise as
idle, and would otherwise show up as a large false hot spot. Python 3.11 has no frame
for the cyclic garbage collector: its time is charged to whichever function was
allocating when a collection triggered, so the report gives the collector's share
separately. The collapsed stacks are kept next to the report (flamegraph.pl input).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from bench import loadgen, procs
from bench.cpu import wait_idle
from bench.procs import ROOT, Proc, start_gateway
from bench.scenarios import (PACED_DELAY_MS, PATH, Settings, Target, check_stream, paced_client, sse_body)

RATE = 100  # samples per second


def ensure_pyspy() -> str:
    script = Path(sys.executable).parent / "py-spy"
    if not script.exists():
        print("bench: --profile needs py-spy; installing it into this venv (pip install py-spy)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)
    return str(script)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _function(frame: str) -> str:
    """`name (path:line)` -> `name (short path)`: one row per function, not per line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", str(ROOT) + "/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"`{name}` ({path})"


def summarize(raw: str, top: int = 20) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """Total samples, the functions with the most own samples, and with the most inclusive ones."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_function(f) for f in stack.split(";") if " (" in f]
        if frames:
            own[frames[-1]] += n
        for function in set(frames):
            inclusive[function] += n
    # Inclusive: the interesting middle of the stack, not the event loop's and the
    # request dispatch's outer frames, which hold nearly everything.
    outer = ("run_forever", "_run_once", "run_until_complete", "run_app", "<module>", "`main`", "`serve`",
             "`_run`", "Handle._run", "_handle_request", "Application._handle", "middleware", "impl`",
             "`create_response`", "runpy")
    middle = [(f, n) for f, n in inclusive.most_common() if not any(s in f for s in outer)]
    return total, own.most_common(top), middle[:top]


async def _gc_snapshot(proc: Proc, stats: Path) -> dict:
    stats.unlink(missing_ok=True)
    os.kill(proc.pid, signal.SIGUSR2)
    for _ in range(50):
        await asyncio.sleep(0.02)
        if stats.exists():
            return json.loads(stats.read_text())
    raise RuntimeError("the profiled gateway did not write its GC statistics")


async def profile_sse(settings: Settings, upstream: Proc, workdir: Path, seconds: int, out_dir: Path,
                      workload: str = "bulk", dialect: str = "openai") -> str:
    pyspy = ensure_pyspy()
    stats = workdir / "gc-stats.json"
    gateway = start_gateway(workdir, upstream.url, name=f"gateway-profile-{workload}", gc_stats=stats)
    try:
        target = Target("gateway", gateway)
        events = await check_stream(target, sse_body(dialect))
        script = loadgen.render("sse", {"PATH": PATH, "BODY": orjson.dumps(sse_body(dialect)).decode(),
                                        "EXPECTED": events, "EXPECT_DONE": True})
        body_file = workdir / "profile-paced.json"
        body_file.write_bytes(orjson.dumps(sse_body(dialect, PACED_DELAY_MS)))

        def load(duration: float):
            if workload == "paced":
                return paced_client(settings, target, body_file, duration, events)
            return loadgen.run_wrk(settings.wrk, target.url, script, connections=settings.connections,
                                   seconds=int(duration))

        await load(settings.warmup)
        await wait_idle([gateway])
        raw_path = out_dir / f"profile-sse-{workload}.txt"
        gc_before, cpu_before = await _gc_snapshot(gateway, stats), gateway.cpu_seconds()
        running = asyncio.create_task(load(seconds + 2))
        await asyncio.sleep(1)
        spy = await asyncio.create_subprocess_exec(
            "taskset", "-c", procs.LOAD_CORE, pyspy, "record", "-p", str(gateway.pid), "-d", str(seconds),
            "-r", str(RATE), "--gil", "-f", "raw", "-o", str(raw_path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await spy.communicate()
        await running
        gc_after, cpu_after = await _gc_snapshot(gateway, stats), gateway.cpu_seconds()
    finally:
        gateway.stop()
    if spy.returncode != 0 or not raw_path.exists():
        return f"## py-spy profile\n\npy-spy failed: {err.decode(errors='replace')[-1000:]}\n"
    cpu = cpu_after - cpu_before
    gc_seconds = [after - before for after, before in zip(gc_after["seconds"], gc_before["seconds"])]
    gc_counts = [after - before for after, before in zip(gc_after["counts"], gc_before["counts"])]
    total, own, inclusive = summarize(raw_path.read_text())
    lines = [f"## py-spy profile of the gateway, SSE {workload} ({dialect} dialect)", "",
             f"A separate gateway, warmed up, then {seconds} s of py-spy at {RATE} Hz during the SSE {workload} "
             f"workload; {total} samples with the GIL "
             f"held ({total / (RATE * seconds):.0%} of the time). Raw stacks: `{_shown(raw_path)}`.", "",
             f"**Garbage collection: {sum(gc_seconds):.2f} s of the gateway's {cpu:.2f} CPU seconds "
             f"({sum(gc_seconds) / cpu:.0%})** over the {seconds + 2} s run: " + ", ".join(
                 f"generation {g}: {gc_counts[g]} collections, {gc_seconds[g]:.2f} s" for g in range(3))
             + f"; the longest generation-2 pause grew to {1e3 * gc_after['longest'][2]:.0f} ms. Python 3.11 "
             "charges collector time to the function that was allocating when a collection triggered, so "
             "allocation-heavy functions' own time below includes part of it.", "",
             "| own time | function |", "|--:|---|"]
    lines += [f"| {100 * n / total:.1f} % | {f} |" for f, n in own]
    lines += ["", "| inclusive (below the request dispatch) | function |", "|--:|---|"]
    lines += [f"| {100 * n / total:.1f} % | {f} |" for f, n in inclusive]
    return "\n".join(lines) + "\n"
