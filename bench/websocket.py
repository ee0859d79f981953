"""The `websocket` workload: 1,000 short independent turns, one after the other, over
one WebSocket (`/v1/responses` upgraded) against the same turns as separate
`POST /v1/responses` with `stream: true` on one keep-alive connection, on the same
gateway and upstream, in one run (issue 26).

Each turn is `{"input": ..., "model": ..., "store": false}` with 8 text deltas: short
turns, where what the transport costs per turn (a request parse, headers, the
handler) is the largest share. The client (this orchestrator, on the load core) waits
for each turn's terminal event before it sends the next. Figures: turns/s and the
gateway's CPU per turn (its process's CPU over the run and until it is idle again,
divided by the turns); rounds alternate which transport goes first. Target: the
WebSocket's CPU per turn at most the POST's (median of the per-round ratios).

Memory per open connection: on a fresh gateway, RSS before and after opening
`CONNECTIONS` WebSockets that each ran one turn and stay open (their connection-local
context held), divided by the connections.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench import procs
from bench.cpu import wait_idle
from bench.report import Verdict
from bench.scenarios import MODEL

TURNS = 1000
CONNECTIONS = 200
BODY = {"input": "Hello from the benchmark", "model": MODEL, "store": False,
        "metadata": {"scripted_deltas": "8"}}
TRANSPORTS = ("websocket", "post")
_SERVICE = {"websocket": {"max_connections_per_user": 10000}}


@dataclass
class TransportRun:
    turns: int
    seconds: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.turns / self.seconds

    @property
    def cpu_us(self) -> float:
        return 1e6 * self.cpu_s / self.turns


@dataclass
class WebSocketRuns:
    runs: dict[str, list[TransportRun]] = field(default_factory=dict)
    kib_per_connection: float | None = None


async def _websocket_turns(session: aiohttp.ClientSession, port: int, turns: int) -> None:
    message = orjson.dumps({"type": "response.create", **BODY}).decode()
    async with session.ws_connect(f"ws://127.0.0.1:{port}/v1/responses") as ws:
        for _ in range(turns):
            await ws.send_str(message)
            while True:
                data = await ws.receive_str()
                if data.startswith('{"type":"error"') or '"type":"response.failed"' in data:
                    raise RuntimeError(f"websocket turn failed: {data[:300]}")
                if '"type":"response.completed"' in data:
                    break


async def _post_turns(session: aiohttp.ClientSession, port: int, turns: int) -> None:
    body = orjson.dumps({**BODY, "stream": True})
    url = f"http://127.0.0.1:{port}/v1/responses"
    for _ in range(turns):
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as reply:
            text = await reply.read()
            if reply.status != 200 or not text.endswith(b"data: [DONE]\n\n") or b"response.completed" not in text:
                raise RuntimeError(f"POST turn failed: {reply.status} {text[-300:]!r}")


async def _measure(gateway: procs.Proc, transport: str, turns: int) -> TransportRun:
    connector = aiohttp.TCPConnector(limit=1)   # one keep-alive connection for the POSTs
    async with aiohttp.ClientSession(connector=connector) as session:
        run = _websocket_turns if transport == "websocket" else _post_turns
        await run(session, gateway.port, 20)   # warm-up
        await wait_idle([gateway])
        cpu = gateway.cpu_seconds()
        started = time.perf_counter()
        await run(session, gateway.port, turns)
        seconds = time.perf_counter() - started
    await wait_idle([gateway])
    return TransportRun(turns, seconds, gateway.cpu_seconds() - cpu)


async def _memory(workdir: Path, upstream: procs.Proc) -> float:
    gateway = procs.start_gateway(workdir, upstream.url, name="gateway-ws-memory", service=_SERVICE)
    sessions: list[aiohttp.ClientSession] = []
    sockets = []
    try:
        message = orjson.dumps({"type": "response.create", **BODY}).decode()
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        sessions.append(session)
        ws = await session.ws_connect(f"ws://127.0.0.1:{gateway.port}/v1/responses")   # warm
        sockets.append(ws)
        await wait_idle([gateway])
        before = gateway.rss_kib()
        for _ in range(CONNECTIONS):
            ws = await session.ws_connect(f"ws://127.0.0.1:{gateway.port}/v1/responses")
            sockets.append(ws)
            await ws.send_str(message)
            while '"type":"response.completed"' not in await ws.receive_str():
                pass
        await asyncio.sleep(1)
        await wait_idle([gateway])
        after = gateway.rss_kib()
        return (after - before) / CONNECTIONS
    finally:
        for ws in sockets:
            await ws.close()
        for session in sessions:
            await session.close()
        gateway.stop()


async def websocket_workload(upstream: procs.Proc, workdir: Path, rounds: int) -> WebSocketRuns:
    results = WebSocketRuns()
    gateway = procs.start_gateway(workdir, upstream.url, name="gateway-websocket", service=_SERVICE)
    try:
        for round_ in range(rounds):
            order = TRANSPORTS if round_ % 2 == 0 else TRANSPORTS[::-1]
            for transport in order:
                print(f"bench: websocket, {transport}, {TURNS} turns, round {round_ + 1}/{rounds}", flush=True)
                results.runs.setdefault(transport, []).append(await _measure(gateway, transport, TURNS))
    finally:
        gateway.stop()
    print(f"bench: websocket, memory of {CONNECTIONS} open connections on a fresh gateway", flush=True)
    results.kib_per_connection = await _memory(workdir, upstream)
    return results


def render(results: WebSocketRuns, verdicts: list[Verdict]) -> list[str]:
    ws, post = results.runs["websocket"], results.runs["post"]
    ratios = [a.cpu_us / b.cpu_us for a, b in zip(ws, post)]
    ratio = statistics.median(ratios)
    lines = [f"## WebSocket: {TURNS} short sequential turns over one socket against POST `stream: true` "
             "(one keep-alive connection)", "",
             "| transport | turns/s | gateway CPU µs per turn |", "|---|--:|--:|"]
    for name, runs in (("WebSocket", ws), ("POST stream: true", post)):
        lines.append(f"| {name} | {statistics.median(r.rate for r in runs):.0f} | "
                     f"{statistics.median(r.cpu_us for r in runs):.0f} |")
    lines += ["", f"WebSocket / POST CPU per turn, median of the rounds: {ratio:.3f} "
              f"({', '.join(f'{value:.3f}' for value in ratios)}). Memory per open WebSocket "
              f"({CONNECTIONS} open, each after one turn): {results.kib_per_connection:.1f} KiB.", ""]
    verdicts.append(Verdict("WebSocket CPU per turn ≤ POST stream: true", ratio <= 1.0, f"{ratio:.3f}×"))
    return lines
