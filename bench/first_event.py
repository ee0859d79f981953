"""`python -m bench.first_event`: instructions the target executes per stream before that
stream's first event, and per whole short stream, counted by `valgrind --tool=callgrind`
over the real process: the naive relay (`bench/relay.py`) and `gateway serve`.

Why (issue 43): when many streams start at once, every request passes its own work before
its first event while the others' wait in the same event loop, so a burst's time to first
event grows with the work a stream does before its first byte; under a closed loop (each
stream's end starts the next) a new stream also waits behind the work the ended streams
left (the gateway settles and records a turn before its terminal event). Timed runs on a
shared 2-core machine cannot resolve that; counted instructions repeat to about 1 %.

Two workloads per target, each after a warm-up with the counters zeroed:

- *before the first event*: `--streams` streams opened at once whose upstream sends its
  first event at once and the next only after 30 s (`scripted_delay_ms`); the dump is
  taken once every stream has its first event: the request's reading, the turn's
  preparation (through the gateway: the upstream conversation create too), the upstream
  stream's opening and the first event's relay;
- *a whole short stream*: `--streams` streams of 2 deltas at zero delay, opened at once,
  the dump once the target is idle again (through the gateway: the turn's record written).

    python -m bench.first_event                   # both targets, 64 streams, Llama Stack's dialect
    python -m bench.first_event --dialect openai --streams 128
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import yaml

from bench.callgrind import _dump_total, _wait_http
from bench.procs import free_port, gateway_config
from bench.scenarios import sse_body
from gateway.allocator import allocator_env

HELD_DELAY_MS = 30_000


class _Stream(asyncio.Protocol):
    """One POST; `first` resolves at its first `data:` line, `done` when the connection closes."""

    def __init__(self, request: bytes):
        loop = asyncio.get_running_loop()
        self.request = request
        self.first: asyncio.Future[None] = loop.create_future()
        self.done: asyncio.Future[None] = loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.ok = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.ok and data.startswith(b"HTTP/1.1 200"):
            self.ok = True
        if b"data: " in data and not self.first.done():
            self.first.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        for future in (self.first, self.done):
            if not future.done():
                future.set_result(None)


def _request(port: int, body: dict) -> bytes:
    payload = orjson.dumps(body)
    return (f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode() + payload


async def _open(port: int, request: bytes, count: int) -> list[_Stream]:
    loop = asyncio.get_running_loop()
    streams = [_Stream(request) for _ in range(count)]
    await asyncio.gather(*(loop.create_connection(lambda s=s: s, "127.0.0.1", port) for s in streams))
    return streams


async def _until_first(port: int, body: dict, count: int) -> list[_Stream]:
    streams = await _open(port, _request(port, body), count)
    await asyncio.gather(*(s.first for s in streams))
    if not all(s.ok for s in streams):
        raise SystemExit("a stream was refused")
    return streams


async def _whole(port: int, body: dict, count: int) -> None:
    streams = await _open(port, _request(port, body), count)
    await asyncio.gather(*(s.done for s in streams))
    if not all(s.ok for s in streams):
        raise SystemExit("a stream was refused")


def _close(streams: list[_Stream]) -> None:
    for stream in streams:
        if stream.transport is not None:
            stream.transport.close()


def measure(target: str, streams: int, dialect: str) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="bench-first-event-"))
    upstream_port, port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-m", "bench.upstream", "--port", str(upstream_port),
                                 "--no-record", "--dialect", dialect],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    upstream_url = f"http://127.0.0.1:{upstream_port}"
    out = work / "callgrind.out"
    env = {**os.environ, **allocator_env(os.environ), "PYTHONHASHSEED": "0", "GATEWAY_LOG_LEVEL": "WARNING"}
    if target == "gateway":
        config = gateway_config(upstream_url, work / "gateway.db", port)
        (work / "config.yaml").write_text(yaml.safe_dump(config))
        command = [str(Path(sys.executable).parent / "gateway"), "serve", "-c", str(work / "config.yaml")]
    else:
        command = [sys.executable, "-m", "bench.relay", "--upstream", upstream_url, "--port", str(port)]
    process = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               cwd=str(Path(__file__).parents[1]))
    held = sse_body(dialect, HELD_DELAY_MS)
    short = sse_body(dialect, deltas=2)
    try:
        _wait_http(f"{upstream_url}/v1/models", 30)
        _wait_http(f"http://127.0.0.1:{port}/liveness", 900)
        dumps: set[Path] = set()
        results: dict[str, float] = {}
        asyncio.run(_whole(port, short, streams))   # warm-up: code paths, pools, the database
        time.sleep(3)
        subprocess.run(["callgrind_control", "-z", str(process.pid)], check=True, capture_output=True)

        async def before_first() -> list[_Stream]:
            return await _until_first(port, held, streams)

        async def hold_then_close() -> None:
            opened = await before_first()
            results["before the first event"] = _dump_total(process.pid, out, dumps) / streams
            _close(opened)
            await asyncio.sleep(2)

        asyncio.run(hold_then_close())
        time.sleep(3)
        subprocess.run(["callgrind_control", "-z", str(process.pid)], check=True, capture_output=True)
        asyncio.run(_whole(port, short, streams))
        time.sleep(3)   # idle: the turns' records are written
        results["a whole 2-delta stream"] = _dump_total(process.pid, out, dumps) / streams
        return results
    finally:
        process.terminate()
        upstream.terminate()
        process.wait(60)
        upstream.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.first_event", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--dialect", default="llama-stack", choices=("llama-stack", "openai"))
    parser.add_argument("--targets", default="relay,gateway")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {target: measure(target, args.streams, args.dialect) for target in args.targets.split(",")}
    if args.json:
        print(json.dumps(results))
        return
    for name in next(iter(results.values())):
        cells = "  ".join(f"{target} {each[name] / 1000:9.1f}k" for target, each in results.items())
        ratio = ""
        if "relay" in results and "gateway" in results:
            ratio = f"  gateway/relay {results['gateway'][name] / results['relay'][name]:.2f}x"
        print(f"{name:26} {cells}{ratio}", flush=True)


if __name__ == "__main__":
    main()
