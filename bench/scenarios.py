"""The throughput scenarios, each run against every target: the scripted upstream
directly, the naive relay (`bench.relay`) and the gateway.

A run is a warm-up, a wait until everything is idle, then the measured load with the
CPU of every process read from /proc around it, then a wait until the target is idle
again (the gateway records turns in the background; that CPU is counted with the run).
The figure that matters is the target's CPU per request or per event: it does not
depend on how fast the load generator or the upstream were on that run.
"""

from __future__ import annotations

import asyncio
import json
import math
import resource
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench import loadgen, sseclient
from bench.cpu import Meter, Usage, wait_idle
from bench import procs
from bench.procs import Proc

PATH = "/v1/responses"
INPUT = "Hello from the benchmark"
MODEL = "scripted-chat"
DIALECTS = ("llama-stack", "openai")
SSE_DELTAS = 64
PACED_DELAY_MS = 20
# The devserver drops its oldest conversations beyond this many (gateway/devserver/store.py).
UPSTREAM_MAX_CONVERSATIONS = 20_000


def json_body() -> dict:
    return {"input": INPUT, "model": MODEL}


def sse_body(dialect: str, delay_ms: int = 0, deltas: int = SSE_DELTAS) -> dict:
    metadata = {"scripted_deltas": str(deltas), "scripted_dialect": dialect}
    if delay_ms:
        metadata["scripted_delay_ms"] = str(delay_ms)
    return {"input": INPUT, "model": MODEL, "stream": True, "metadata": metadata}


@dataclass
class Settings:
    wrk: str
    connections: int = 32
    seconds: int = 5
    warmup: int = 2
    memory_streams: int = 1000
    paced_streams: int = 256
    turns_per_conversation: int = 32


@dataclass
class Target:
    """Where a run sends its requests; that process's CPU is the target's cost."""
    name: str           # "direct" | "relay" | "gateway"
    proc: Proc

    @property
    def url(self) -> str:
        return self.proc.url + PATH


@dataclass
class Run:
    target: str
    count: int                      # requests (JSON) or events (SSE) completed
    seconds: float
    cpu_s: float                    # the target's CPU: during the run and finishing it
    errors: int = 0
    checked: int = 0                # requests or streams whose answer was checked
    p50_ms: float | None = None     # latency (JSON) or time to first event (SSE)
    p90_ms: float | None = None
    burst_p50_ms: float | None = None  # SSE paced, closed loop: the opening burst's time to first event
    cpu_pct: dict[str, float] = field(default_factory=dict)
    disturbed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def cpu_us(self) -> float:
        return 1e6 * self.cpu_s / self.count if self.count else math.inf

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0


def _run(target: Target, usage: Usage, count: int, seconds: float, **fields) -> Run:
    on_gateway_core = [] if target.name == "direct" else ["target"]
    run = Run(target.name, count, seconds, usage.total("target"), **fields)
    run.cpu_pct = {name: usage.percent(name) for name in ("target", "upstream", "load", "bench")}
    # Every process the benchmark put on the load core (the upstream's peers too, e.g. the
    # engine scenario's MCP server) is "ours" there.
    run.disturbed = usage.disturbed(on_gateway_core, [name for name in usage.cpu if name != "target"
                                                      and not name.startswith("core ")])
    return run


def _watched(target: Target, upstream: Proc) -> dict[str, Proc]:
    return {"target": target.proc, "upstream": upstream}


async def _wrk(settings: Settings, target: Target, upstream: Proc, script: str, warm_script: str | None = None,
               probe: "Probe | None" = None, peers: dict[str, Proc] | None = None) -> tuple[loadgen.WrkResult, Usage]:
    """`peers`: more processes on the load core that serve the target (watched too)."""
    await loadgen.run_wrk(settings.wrk, target.url, warm_script or script, connections=settings.connections,
                          seconds=settings.warmup)
    await wait_idle([target.proc, upstream, *(peers or {}).values()])
    async with Meter({**_watched(target, upstream), **(peers or {})}) as usage:
        task = asyncio.create_task(probe.run()) if probe is not None else None
        try:
            result = await loadgen.run_wrk(settings.wrk, target.url, script, connections=settings.connections,
                                           seconds=settings.seconds)
        finally:
            if task is not None:
                probe.stop.set()
                await task
    usage.cpu["load"] = result.cpu_s
    return result, usage


# -- JSON -------------------------------------------------------------------------------

async def json_new(settings: Settings, target: Target, upstream: Proc, authorization: str = "") -> Run:
    """A new conversation every request (through the gateway: an extra upstream call).
    `authorization`: an Authorization header to send (the `jwk` workload)."""
    script = loadgen.render("json", {"PATH": PATH, "BODY": orjson.dumps(json_body()).decode(),
                                     "AUTHORIZATION": authorization})
    result, usage = await _wrk(settings, target, upstream, script)
    return _run(target, usage, result.requests, result.duration_s, errors=result.error_count,
                checked=result.requests, p50_ms=result.p50_ms, p90_ms=result.p90_ms)


async def _start_conversations(target: Target, upstream: Proc, count: int) -> list[str]:
    """Conversations for the continuing variant, started before the clock runs: through the
    gateway by a first turn (whose reply names it), otherwise with the upstream's API."""
    ids: list[str] = []
    limit = asyncio.Semaphore(32)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=32)) as session:
        async def one() -> None:
            async with limit:
                if target.name != "gateway":
                    async with session.post(upstream.url + "/v1/conversations", json={"metadata": {}}) as resp:
                        resp.raise_for_status()
                        ids.append((await resp.json())["id"])
                else:
                    async with session.post(target.url, json=json_body()) as resp:
                        resp.raise_for_status()
                        ids.append((await resp.json())["conversation"])
        await asyncio.gather(*(one() for _ in range(count)))
    return ids


async def json_continue(settings: Settings, target: Target, upstream: Proc, workdir: Path,
                        expected_rps: float) -> Run:
    """Each in-flight request continues its own conversation (`turns_per_conversation`
    turns, then the client moves on to a fresh pre-started one)."""
    turns = settings.turns_per_conversation

    def needed(seconds: int) -> int:
        return math.ceil(2.5 * expected_rps * seconds / turns) + 2 * settings.connections

    warm_count, run_count = needed(settings.warmup), needed(settings.seconds)
    run_count = min(run_count, UPSTREAM_MAX_CONVERSATIONS // 2 - warm_count)
    ids = await _start_conversations(target, upstream, warm_count + run_count)

    def script(name: str, chunk: list[str]) -> str:
        ids_file = workdir / f"conversations-{target.name}-{name}.txt"
        ids_file.write_text("\n".join(chunk) + "\n")
        return loadgen.render("continue", {"PATH": PATH, "INPUT": orjson.dumps("Tell me more").decode(),
                                           "IDS_FILE": str(ids_file), "TURNS": turns})

    result, usage = await _wrk(settings, target, upstream, script("run", ids[warm_count:]),
                               warm_script=script("warmup", ids[:warm_count]))
    counters = result.counters
    run = _run(target, usage, result.requests, result.duration_s, checked=result.requests,
               errors=result.error_count + counters.get("lost", 0), p50_ms=result.p50_ms, p90_ms=result.p90_ms)
    if counters.get("exhausted"):
        run.notes.append(f"{counters['exhausted']} requests reused conversations past {turns} turns")
    return run


# -- SSE, bulk: each stream written by the upstream in one go ------------------------------

async def check_stream(target: Target, body: dict) -> int:
    """One stream, fully checked (status, last event, sequence numbers through the gateway);
    returns its number of events."""
    result = await sseclient.post(target.proc.port, PATH, orjson.dumps(body))
    if not result.ok:
        raise RuntimeError(f"{target.name}: a stream answered {result.status}: {result.body[:500]!r}")
    if target.name == "gateway":
        problems = sseclient.sequence_problems(result.events)
        if not result.done:
            problems.append("it does not end with data: [DONE]")
        if problems:
            raise RuntimeError(f"gateway stream is malformed: {'; '.join(problems)}")
    last = orjson.loads(result.events[-1]).get("type") if result.events else None
    if last != "response.completed":
        raise RuntimeError(f"{target.name}: the stream's last event is {last!r}, not response.completed")
    return len(result.events)


class Probe:
    """One stream at a time next to wrk's: time to first event, and the event count checked."""

    def __init__(self, target: Target, body: bytes, events: int):
        self.target, self.body, self.expected = target, body, events
        self.stop = asyncio.Event()
        self.ttfe: list[float] = []
        self.events = self.bad = 0

    async def run(self) -> None:
        while not self.stop.is_set():
            try:
                result = await sseclient.post(self.target.proc.port, PATH, self.body)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                self.bad += 1
                continue
            self.events += len(result.events)
            if result.ok and result.ttfe is not None:
                self.ttfe.append(1e3 * result.ttfe)
            self.bad += not result.ok or len(result.events) != self.expected


async def sse_bulk(settings: Settings, target: Target, upstream: Proc, dialect: str) -> Run:
    body = sse_body(dialect)
    events = await check_stream(target, body)
    script = loadgen.render("sse", {"PATH": PATH, "BODY": orjson.dumps(body).decode(), "EXPECTED": events,
                                    "EXPECT_DONE": target.name == "gateway"})
    probe = Probe(target, orjson.dumps(body), events)
    result, usage = await _wrk(settings, target, upstream, script, probe=probe)
    counters = result.counters
    return _run(target, usage, counters["events"] + probe.events, result.duration_s,
                errors=result.error_count + counters.get("bad_body", 0) + counters.get("bad_status", 0) + probe.bad,
                checked=result.requests + len(probe.ttfe),
                p50_ms=statistics.median(probe.ttfe) if probe.ttfe else None)


# -- SSE, paced: an event every 20 ms, each its own read; many streams start at once ------

async def paced_client(settings: Settings, target: Target, body_file: Path, seconds: float,
                        events: int, shape: str = "waves") -> tuple[dict, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = await asyncio.create_subprocess_exec(
        "taskset", "-c", procs.LOAD_CORE, sys.executable, "-m", "bench.paced", str(target.proc.port), str(body_file), "--streams", str(settings.paced_streams),
        "--seconds", str(seconds), "--expected", str(events), "--shape", shape,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(Path(__file__).parents[1]))
    out, err = await proc.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.paced failed: {err.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.decode().strip().splitlines()[-1]), cpu


async def sse_paced(settings: Settings, target: Target, upstream: Proc, dialect: str, workdir: Path,
                    shape: str = "waves") -> Run:
    """`shape`: `waves` of `paced_streams` opened at once, or `closed`: a closed loop of
    `paced_streams` where each stream's end starts the next (its time to first event is
    the loop's streams', started among the others' events; the opening burst's apart)."""
    events = await check_stream(target, sse_body(dialect))
    body_file = workdir / f"paced-{dialect}.json"
    body_file.write_bytes(orjson.dumps(sse_body(dialect, PACED_DELAY_MS)))
    await paced_client(settings, target, body_file, 0, events)  # one wave: warm-up
    await wait_idle([target.proc, upstream])
    async with Meter(_watched(target, upstream)) as usage:
        result, client_cpu = await paced_client(settings, target, body_file, settings.seconds, events, shape)
    usage.cpu["load"] = client_cpu
    if shape == "closed":
        return _run(target, usage, result["events"], result["seconds"], errors=result["bad"],
                    checked=result["streams"], p50_ms=result["loop_ttfe_p50_ms"], p90_ms=result["loop_ttfe_p90_ms"],
                    burst_p50_ms=result["burst_ttfe_p50_ms"])
    return _run(target, usage, result["events"], result["seconds"], errors=result["bad"], checked=result["streams"],
                p50_ms=result["ttfe_p50_ms"], p90_ms=result["ttfe_p90_ms"])
