"""`python -m bench.callgrind`: instructions a whole `gateway serve` executes per JSON
turn, per relayed SSE event and per WebSocket turn, counted by `valgrind --tool=callgrind` over the real
process (HTTP server, middleware, the turn's life, the upstream client, SQLite writes).

CPU time on a shared machine moves by tens of percent from minute to minute; counted
instructions repeat to about 1 %, so two checkouts can be compared on a busy machine
(`--gateway` names another checkout's `gateway` command; the scripted upstream is this
checkout's). Each workload runs after a warm-up with the counters zeroed
(`callgrind_control -z`) and ends, once the gateway is idle again (turns are recorded
after the response), with a dump (`callgrind_control -d`) whose total is read.

    python -m bench.callgrind                                   # this checkout
    python -m bench.callgrind --gateway ../base/.venv/bin/gateway --json
    python -m bench.callgrind --access-log-cost                 # the access line: off, text, json
    python -m bench.callgrind --metrics-pairs 5 --only json --turns 1200   # what metrics cost

`--metrics-pairs N` measures what recording metrics costs: N pairs of gateways alike but
for `service.metrics`, the two of a pair run side by side (so the machine's load falls
on both), each pair's on/off ratio printed and their median. One pair is not enough:
the group commit's batches and the garbage collector's passes fall differently in each
process, which moves a whole process's count per turn by ~1 % either way; more turns
(`--turns`) and more pairs narrow it.

`--only lone` (also in the default run) is the JSON turn at low load: one turn at a time,
the next `LONE_GAP` (40 ms) after the previous one's answer, so the gateway is idle
between turns and every step of a turn (the upstream calls, the record's write) is a
wake-up of its own; its count over the saturated JSON turn's (`json turn`, 32 at a
time) is what a turn costs more alone (`lone / saturated` is printed when both ran).

`--access-log text|json` measures with the access line on (`service.access_log`, at
GATEWAY_LOG_LEVEL=INFO so it is written); `--access-log-cost` measures the JSON turn and
the SSE events with it off, as text and as JSON, in one run.

`--tracing-cost` measures the `--only` workloads (default json,lone) with tracing off and
on (`OTEL_*` set; spans exported over OTLP/HTTP to a sink in this process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import aiohttp
import yaml

from bench.procs import free_port, gateway_config
from bench.legacy import _TOKEN_EVENTS
from bench.legacy import STREAMS as LEGACY_STREAMS
from bench.scenarios import json_body, sse_body
from bench.websocket import _websocket_turns
from gateway.allocator import allocator_env

TURNS = 300
STREAMS = 60
# The low-load JSON turn: this many, one at a time, each `LONE_GAP` seconds after the
# previous one's answer (under callgrind a turn takes some 20-40 ms of its own).
LONE_TURNS = 100
LONE_GAP = 0.040
CONCURRENCY = 32
WS_SOCKETS = 8


async def _post_all(url: str, count: int, body: Callable[[], dict], units: Callable[[bytes], int]) -> int:
    """`count` requests, `CONCURRENCY` at a time, each checked for a 200; what `units`
    counts in their answers, summed."""
    total = 0
    async with aiohttp.ClientSession() as session:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            nonlocal total
            async with gate, session.post(url, json=body()) as reply:
                assert reply.status == 200, await reply.text()
                total += units(await reply.read())
        await asyncio.gather(*(one() for _ in range(count)))
    return total


async def _json_turns(url: str, count: int) -> int:
    return await _post_all(url, count, json_body, lambda answer: 1)


async def _lone_turns(url: str, count: int) -> int:
    """`count` JSON turns one at a time, `LONE_GAP` apart: a gateway idle between turns."""
    async with aiohttp.ClientSession() as session:
        for _ in range(count):
            async with session.post(url, json=json_body()) as reply:
                assert reply.status == 200, await reply.text()
                await reply.read()
            await asyncio.sleep(LONE_GAP)
    return count


async def _chained_turns(url: str, count: int) -> int:
    """`count` JSON turns on `CONCURRENCY` chains at once, each turn continuing its chain's
    previous one by `previous_response_id` (the first of each chain a new conversation)."""
    async with aiohttp.ClientSession() as session:
        async def chain(turns: int) -> None:
            previous = None
            for _ in range(turns):
                body = json_body() if previous is None else {**json_body(), "previous_response_id": previous}
                async with session.post(url, json=body) as reply:
                    assert reply.status == 200, await reply.text()
                    previous = (await reply.json())["id"]
        await asyncio.gather(*(chain(count // CONCURRENCY + (i < count % CONCURRENCY)) for i in range(CONCURRENCY)))
    return count


async def _streams(url: str, count: int, dialect: str) -> int:
    """The streams' events (data frames, `[DONE]` excluded)."""
    return await _post_all(url, count, lambda: sse_body(dialect), lambda answer: (
        answer.count(b"\ndata: ") + answer.startswith(b"data: ") - answer.count(b"data: [DONE]")))


async def _token_streams(url: str, count: int, body: dict) -> int:
    """Legacy comparison: the streams' token events (text deltas, `token` frames)."""
    return await _post_all(url, count, lambda: body,
                           lambda answer: sum(answer.count(mark) for mark in _TOKEN_EVENTS))


async def _ws_turns(port: int, count: int) -> int:
    """`count` WebSocket turns (bench/websocket.py's: 8 deltas, `store: false`), one after
    the other on each of `WS_SOCKETS` sockets at once."""
    async with aiohttp.ClientSession() as session:
        share = [count // WS_SOCKETS + (i < count % WS_SOCKETS) for i in range(WS_SOCKETS)]
        await asyncio.gather(*(_websocket_turns(session, port, turns) for turns in share if turns))
    return count


def _wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True, timeout=5)
            return
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds} s")


def _dump_total(pid: int, out: Path, before: set[Path]) -> int:
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = sorted(set(out.parent.glob(out.name + ".*")) - before)
        for path in new:
            match = re.search(r"^(?:totals|summary): (\d+)", path.read_text(errors="replace"), re.M)
            if match:
                before.add(path)
                return int(match.group(1))
        time.sleep(0.2)
    raise SystemExit("callgrind wrote no dump")


def measure(gateway: str, turns: int, streams: int, service: dict | None = None,
            only: str | tuple[str, ...] | None = None, dialect: str = "llama-stack",
            environ: dict[str, str] | None = None) -> dict[str, float]:
    """`environ`: more environment for the gateway (`OTEL_*`: tracing on)."""
    work = Path(tempfile.mkdtemp(prefix="bench-callgrind-"))
    upstream_port, port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(upstream_port),
                                 "--dialect", dialect],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = gateway_config(f"http://127.0.0.1:{upstream_port}", work / "gateway.db", port)
    config["service"].update(service or {})
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    out = work / "callgrind.out"
    # As `gateway serve` runs itself (it re-executes on glibc's allocator otherwise,
    # which valgrind would not follow).
    # WARNING keeps the log quiet, unless the access line is measured: then it is written.
    level = "INFO" if config["service"].get("access_log") else "WARNING"
    env = {**os.environ, **allocator_env(os.environ), "PYTHONHASHSEED": "0", "GATEWAY_LOG_LEVEL": level,
           **(environ or {})}
    target = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               gateway, "serve", "-c", str(work / "config.yaml")],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"http://127.0.0.1:{upstream_port}/v1/models", 30)
        _wait_http(f"{base}/liveness", 900)   # valgrind starts slowly on a busy machine
        dumps: set[Path] = set()
        results: dict[str, float] = {}
        workloads = [("json turn", lambda: _json_turns(base + "/v1/responses", turns)),
                     ("lone json turn", lambda: _lone_turns(base + "/v1/responses", LONE_TURNS)),
                     ("chained json turn", lambda: _chained_turns(base + "/v1/responses", turns))]
        for each in ("llama-stack", "openai"):
            workloads.append((f"sse event, {each}",
                              lambda each=each: _streams(base + "/v1/responses", streams, each)))
        for stream, (path, body, _) in LEGACY_STREAMS.items():
            # bench/legacy.py's comparison: the same 64-delta answer as /v1/responses events
            # and as `token` frames, per token event (the upstream's dialect: --dialect).
            workloads.append((f"legacy {stream} token, {dialect}",
                              lambda path=path, body=body: _token_streams(base + path, streams, body)))
        workloads.append(("ws turn", lambda: _ws_turns(port, turns)))
        for name, run in workloads:
            if only and not name.startswith(only):
                continue
            asyncio.run(_warm(run))
            time.sleep(2)
            subprocess.run(["callgrind_control", "-z", str(target.pid)], check=True, capture_output=True)
            units = asyncio.run(run())
            time.sleep(3)  # idle: the turns' records are written
            results[name] = _dump_total(target.pid, out, dumps) / units
        return results
    finally:
        target.terminate()
        upstream.terminate()
        target.wait(60)
        upstream.wait(10)
        shutil.rmtree(work, ignore_errors=True)


async def _warm(run) -> None:  # type: ignore[no-untyped-def]
    await run()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.callgrind", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", default=str(Path(sys.executable).parent / "gateway"),
                        help="the `gateway` command to measure (default: this venv's)")
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--streams", type=int, default=STREAMS)
    parser.add_argument("--no-metrics", action="store_true", help="service.metrics: false (what recording costs)")
    parser.add_argument("--only", type=_families,
                        help="workload families, comma-separated (json: the json turn, 32 at a time / lone: "
                             "the json turn one at a time, 40 ms apart / chained: the json turn continuing the "
                             "previous one by previous_response_id, 32 chains at once / sse events / legacy "
                             "token events / ws turn: bench/websocket.py's turn, 8 sockets at once)")
    parser.add_argument("--dialect", default="llama-stack", choices=("llama-stack", "openai"),
                        help="the upstream's default dialect (what the legacy workloads stream)")
    parser.add_argument("--access-log", choices=("off", "on", "text", "json"), default="off",
                        help="service.access_log and its format (written at GATEWAY_LOG_LEVEL=INFO); `on` "
                             "sets no format (a checkout before issue 25: aiohttp's access log)")
    parser.add_argument("--access-log-cost", action="store_true",
                        help="the JSON turn and SSE events with the access line off, text and json, in one run")
    parser.add_argument("--tracing-cost", action="store_true",
                        help="the --only workloads (default json,lone) with tracing off and on (OTEL_* set, spans "
                             "exported over OTLP/HTTP to a sink here that answers 200), one after the other")
    parser.add_argument("--metrics-pairs", type=int, default=0, metavar="N",
                        help="N side-by-side pairs of metrics on and off: each pair's ratio, and their median")
    parser.add_argument("--json", action="store_true", help="print {workload: instructions per unit}")
    args = parser.parse_args()
    if args.access_log_cost:
        _access_log_cost(args)
        return
    if args.metrics_pairs:
        _metrics_pairs(args)
        return
    if args.tracing_cost:
        _tracing_cost(args)
        return
    service = {"metrics": False} if args.no_metrics else {}
    service.update(_access_log(args.access_log))
    results = measure(args.gateway, args.turns, args.streams, service, args.only, args.dialect)
    if args.json:
        print(json.dumps(results))
        return
    for name, value in results.items():
        print(f"{name:28} {value / 1000:10.1f}k instructions")
    if "json turn" in results and "lone json turn" in results:
        print(f"{'lone / saturated':28} {results['lone json turn'] / results['json turn']:10.3f}x")


_FAMILIES = ("json", "lone", "chained", "sse", "legacy", "ws")


def _families(value: str) -> tuple[str, ...]:
    families = tuple(value.split(","))
    for family in families:
        if family not in _FAMILIES:
            raise argparse.ArgumentTypeError(f"{family!r}: one of {', '.join(_FAMILIES)}")
    return families


def _access_log(mode: str) -> dict:
    if mode in ("off", "on"):
        return {"access_log": mode == "on"}
    return {"access_log": True, "access_log_format": mode}


def _access_log_cost(args: argparse.Namespace) -> None:
    """What the access line costs per JSON turn and per SSE event: the same workloads on
    three gateways (off, text, json), one after the other."""
    base = {"metrics": False} if args.no_metrics else {}
    runs = {mode: measure(args.gateway, args.turns, args.streams, {**base, **_access_log(mode)}, ("json", "sse"),
                          args.dialect) for mode in ("off", "text", "json")}
    if args.json:
        print(json.dumps(runs))
        return
    print(f"{'workload':28} {'off':>10} {'text':>10} {'json':>10} {'text/off':>9} {'json/off':>9}")
    for name, off in runs["off"].items():
        text, as_json = runs["text"][name], runs["json"][name]
        print(f"{name:28} {off / 1000:9.1f}k {text / 1000:9.1f}k {as_json / 1000:9.1f}k "
              f"{text / off:8.3f}x {as_json / off:8.3f}x")


class _OtlpSink(BaseHTTPRequestHandler):
    """A collector that takes every export and answers 200 (what tracing costs the
    gateway when its collector keeps up)."""

    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _tracing_cost(args: argparse.Namespace) -> None:
    """What tracing costs per unit: the same workloads on two gateways, tracing off then
    on (`OTEL_SDK_DISABLED=false`, `OTEL_EXPORTER_OTLP_ENDPOINT` this process's sink;
    every request sampled, the SDK's default)."""
    service = {"metrics": False} if args.no_metrics else {}
    service.update(_access_log(args.access_log))
    only = args.only or ("json", "lone")
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _OtlpSink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    tracing = {"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_port}"}
    try:
        runs = {"off": measure(args.gateway, args.turns, args.streams, service, only, args.dialect),
                "on": measure(args.gateway, args.turns, args.streams, service, only, args.dialect, tracing)}
    finally:
        sink.shutdown()
    if args.json:
        print(json.dumps(runs))
        return
    print(f"{'workload':28} {'off':>10} {'on':>10} {'on/off':>9}")
    for name, off in runs["off"].items():
        on = runs["on"][name]
        print(f"{name:28} {off / 1000:9.1f}k {on / 1000:9.1f}k {on / off:8.3f}x")


def _metrics_pairs(args: argparse.Namespace) -> None:
    """Metrics on against off, in pairs run side by side."""
    from concurrent.futures import ThreadPoolExecutor
    from statistics import median

    base = _access_log(args.access_log)
    ratios: dict[str, list[float]] = {}
    runs = []
    for pair in range(args.metrics_pairs):
        with ThreadPoolExecutor(2) as pool:
            on, off = pool.map(lambda service: measure(args.gateway, args.turns, args.streams, service, args.only,
                                                       args.dialect),
                               ({**base}, {**base, "metrics": False}))
        runs.append({"on": on, "off": off})
        for name in on:
            ratios.setdefault(name, []).append(on[name] / off[name])
            print(f"pair {pair + 1}: {name:28} on {on[name] / 1000:9.1f}k  off {off[name] / 1000:9.1f}k  "
                  f"on/off {on[name] / off[name]:.4f}", flush=True)
    if args.json:
        print(json.dumps({"pairs": runs, "median": {name: median(each) for name, each in ratios.items()}}))
        return
    for name, each in ratios.items():
        print(f"{name:28} median on/off {median(each):.4f} over {len(each)} pairs "
              f"({', '.join(f'{ratio:.4f}' for ratio in each)})")


if __name__ == "__main__":
    main()
