"""The three scenarios, each measured against the gateway and against the upstream directly.

Every throughput run is a short wrk warm-up, a pause so the gateway finishes what the
warm-up left behind, then the measured wrk run with CPU snapshots of the processes
around it. Both sides get the same requests from the same generator.
"""

from __future__ import annotations

import asyncio
import math
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench import loadgen, sseclient
from bench.procs import CLK_TCK, Proc, start_gateway

PATH = "/v1/responses"
INPUT = "Hello from the benchmark"
JSON_BODY = {"input": INPUT, "model": "scripted-chat"}
SSE_DELTAS = 64
SSE_BODY = {"input": INPUT, "model": "scripted-chat", "stream": True,
            "metadata": {"scripted_deltas": str(SSE_DELTAS)}}
# Slow streams: an event every 200 ms for far longer than the scenario holds them.
MEMORY_DELAY_MS = 200
MEMORY_BODY = {"input": INPUT, "model": "scripted-chat", "stream": True,
               "metadata": {"scripted_deltas": "2000", "scripted_delay_ms": str(MEMORY_DELAY_MS)}}
# The devserver drops its oldest conversations beyond this many (gateway/devserver/store.py).
UPSTREAM_MAX_CONVERSATIONS = 20_000


@dataclass
class Settings:
    wrk: str
    connections: int = 32
    seconds: int = 10
    warmup: int = 2
    memory_streams: int = 1000
    turns_per_conversation: int = 32


@dataclass
class Target:
    """Where a run sends its requests: the gateway, or the upstream directly."""
    name: str           # "direct" | "gateway"
    proc: Proc

    @property
    def url(self) -> str:
        return self.proc.url + PATH


def _core_busy() -> dict[str, int]:
    """Busy jiffies per core from /proc/stat (everything but idle and iowait)."""
    busy = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *values = line.split()
                numbers = [int(v) for v in values]
                busy[f"core {name[3:]}"] = sum(numbers) - numbers[3] - numbers[4]
    return busy


class CpuMeter:
    """CPU seconds of each watched process (and of this process) across a measured window,
    and how busy each core was: a core busier than what we put on it means something else
    on the machine ran there and the figures are disturbed."""

    def __init__(self, procs: dict[str, Proc]):
        self.procs = procs

    def __enter__(self) -> "CpuMeter":
        self.start_cores = _core_busy()
        self.start_wall = time.perf_counter()
        self.start = {name: proc.cpu_seconds() for name, proc in self.procs.items()}
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.start_self = usage.ru_utime + usage.ru_stime
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.start_wall
        self.cpu = {name: proc.cpu_seconds() - self.start[name] for name, proc in self.procs.items()}
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu["bench"] = usage.ru_utime + usage.ru_stime - self.start_self
        cores = _core_busy()
        for name in ("core 0", "core 1"):
            self.cpu[name] = (cores.get(name, 0) - self.start_cores.get(name, 0)) / CLK_TCK

    def percent(self) -> dict[str, float]:
        return {name: 100 * seconds / self.wall for name, seconds in self.cpu.items()}


@dataclass
class RunStats:
    """What every measured run reports besides its own metrics."""
    target: str
    errors: dict[str, int]
    cpu_pct: dict[str, float]          # gateway / upstream / wrk / bench, % of one core
    gateway_cpu_s: float = 0.0         # during the measured run
    gateway_drain_cpu_s: float = 0.0   # after it, finishing the backlog (0 when it was idle within 1 s)
    drain_s: float = 0.0               # how long that took
    notes: list[str] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


@dataclass
class JsonRun(RunStats):
    rps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    requests: int = 0

    @property
    def gateway_cpu_us_per_request(self) -> float | None:
        return 1e6 * self.gateway_cpu_s / self.requests if self.target == "gateway" and self.requests else None

    @property
    def sustained_rps(self) -> float:
        """What the gateway's one core sustains once deferred work is counted: the run's
        requests over the CPU seconds they cost, backlog included (never above the measured rate)."""
        total = self.gateway_cpu_s + self.gateway_drain_cpu_s
        if self.target != "gateway" or not self.gateway_drain_cpu_s or not total:
            return self.rps
        return min(self.rps, self.requests / total)


@dataclass
class SseRun(RunStats):
    streams_per_s: float = 0.0
    events_per_s: float = 0.0
    events_per_stream: int = 0
    ends_with_done: bool = False
    ttfe_p50_ms: float | None = None
    ttfe_samples: int = 0
    streams_checked: int = 0
    events_relayed: int = 0

    @property
    def gateway_cpu_us_per_event(self) -> float | None:
        if self.target != "gateway" or not self.events_relayed:
            return None
        return 1e6 * self.gateway_cpu_s / self.events_relayed

    @property
    def sustained_events_per_s(self) -> float:
        """Like JsonRun.sustained_rps, for events."""
        total = self.gateway_cpu_s + self.gateway_drain_cpu_s
        if self.target != "gateway" or not self.gateway_drain_cpu_s or not total:
            return self.events_per_s
        return min(self.events_per_s, self.events_relayed / total)


@dataclass
class MemoryRun:
    streams: int
    opened: int
    failed: int
    still_open: int
    open_seconds: float
    rss_before_kib: int
    rss_open_kib: int

    @property
    def kib_per_stream(self) -> float:
        return (self.rss_open_kib - self.rss_before_kib) / max(self.opened, 1)


async def wait_idle(procs: list[Proc], max_seconds: float = 60.0) -> float:
    """Seconds until every process uses under 5 % of a core (over 0.3 s), at most max_seconds.

    The gateway persists turns in the background after answering, so at the end of a
    run it may still be working through a backlog: that work belongs to the run, and
    the next run must not start on top of it.
    """
    started = time.perf_counter()
    while time.perf_counter() - started < max_seconds:
        before = [proc.cpu_seconds() for proc in procs]
        await asyncio.sleep(0.3)
        if all((proc.cpu_seconds() - cpu) / 0.3 < 0.05 for proc, cpu in zip(procs, before)):
            break
    return time.perf_counter() - started


async def _warm_and_measure(settings: Settings, target: Target, script: str, procs: dict[str, Proc],
                            warm_script: str | None = None, during=None) -> tuple[loadgen.WrkResult, CpuMeter]:
    """Warm-up run, wait for quiet, then the measured run (`during` runs alongside it: the
    probe), then wait for quiet again, noting how long and how much CPU that took."""
    await loadgen.run_wrk(settings.wrk, target.url, warm_script or script, connections=settings.connections,
                          seconds=settings.warmup)
    await wait_idle(list(procs.values()))
    with CpuMeter(procs) as meter:
        task = asyncio.create_task(during.run()) if during is not None else None
        try:
            result = await loadgen.run_wrk(settings.wrk, target.url, script, connections=settings.connections,
                                           seconds=settings.seconds)
        finally:
            if task is not None:
                during.stop.set()
                await task
    meter.cpu["wrk"] = result.cpu_s
    cpu_at_end = {name: proc.cpu_seconds() for name, proc in procs.items()}
    meter.drain_s = await wait_idle(list(procs.values()))
    meter.drain_cpu = {name: proc.cpu_seconds() - cpu_at_end[name] for name, proc in procs.items()}
    return result, meter


def _stats(target: Target, result: loadgen.WrkResult, meter: CpuMeter) -> dict:
    drained = target.name == "gateway" and meter.drain_s > 1.0
    return {"target": target.name, "errors": dict(result.errors), "cpu_pct": meter.percent(),
            "gateway_cpu_s": meter.cpu.get("gateway", 0.0),
            "gateway_drain_cpu_s": meter.drain_cpu.get("gateway", 0.0) if drained else 0.0,
            "drain_s": meter.drain_s if drained else 0.0}


# -- scenario 1: JSON -------------------------------------------------------------------

async def json_new(settings: Settings, target: Target, procs: dict[str, Proc]) -> JsonRun:
    """A new conversation every request (through the gateway: an extra upstream call and a
    new conversation row per request)."""
    script = loadgen.render("json", {"PATH": PATH, "BODY": orjson.dumps(JSON_BODY).decode()})
    result, meter = await _warm_and_measure(settings, target, script, procs)
    return JsonRun(**_stats(target, result, meter), rps=result.rps, p50_ms=result.p50_ms, p99_ms=result.p99_ms,
                   requests=result.requests)


async def _start_conversations(target: Target, count: int) -> list[str]:
    """Conversations for the continuing variant, started before the clock runs.

    Direct: created with the upstream's Conversations API. Gateway: the first turn of
    each, whose reply names the conversation (the way a client starts one).
    """
    ids: list[str] = []
    limit = asyncio.Semaphore(32)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=32)) as session:
        async def one() -> None:
            async with limit:
                if target.name == "direct":
                    async with session.post(target.proc.url + "/v1/conversations", json={"metadata": {}}) as resp:
                        resp.raise_for_status()
                        ids.append((await resp.json())["id"])
                else:
                    async with session.post(target.url, json=JSON_BODY) as resp:
                        resp.raise_for_status()
                        ids.append((await resp.json())["conversation"])
        await asyncio.gather(*(one() for _ in range(count)))
    return ids


async def json_continue(settings: Settings, target: Target, procs: dict[str, Proc], workdir: Path,
                        expected_rps: float) -> JsonRun:
    """Each in-flight request continues its own conversation (for `turns_per_conversation`
    turns, then the client moves to a fresh pre-started one)."""
    turns = settings.turns_per_conversation

    def needed(seconds: int) -> int:
        # Generous: continuing turns can be faster than the new-conversation ones.
        return math.ceil(2.5 * expected_rps * seconds / turns) + 2 * settings.connections

    warm_count, run_count = needed(settings.warmup), needed(settings.seconds)
    notes = []
    if warm_count + run_count > UPSTREAM_MAX_CONVERSATIONS // 2:
        run_count = UPSTREAM_MAX_CONVERSATIONS // 2 - warm_count
        notes.append(f"conversations for the measured run capped at {run_count} (the upstream keeps at most "
                     f"{UPSTREAM_MAX_CONVERSATIONS:,})")
    started = time.perf_counter()
    ids = await _start_conversations(target, warm_count + run_count)
    prep_s = time.perf_counter() - started

    def script(name: str, chunk: list[str]) -> str:
        ids_file = workdir / f"conversations-{target.name}-{name}.txt"
        ids_file.write_text("\n".join(chunk) + "\n")
        return loadgen.render("continue", {"PATH": PATH, "INPUT": orjson.dumps("Tell me more").decode(),
                                           "IDS_FILE": str(ids_file), "TURNS": turns})

    result, meter = await _warm_and_measure(settings, target, script("run", ids[warm_count:]), procs,
                                            warm_script=script("warmup", ids[:warm_count]))
    counters = result.counters
    run = JsonRun(**_stats(target, result, meter), rps=result.rps, p50_ms=result.p50_ms, p99_ms=result.p99_ms,
                  requests=result.requests, notes=notes)
    # Replies without the echoed index (errors) are counted too: a lost conversation.
    run.errors["bad_reply"] = counters.get("lost", 0)
    run.errors["status"] = max(run.errors["status"], counters.get("bad_status", 0))
    if counters.get("exhausted"):
        run.notes.append(f"{counters['exhausted']} requests reused conversations past {turns} turns "
                         f"(the pre-started pool ran out)")
    run.notes.append(f"{len(ids)} conversations started beforehand in {prep_s:.1f} s")
    return run


# -- scenario 2: SSE --------------------------------------------------------------------

@dataclass
class StreamShape:
    events: int
    done: bool


async def check_stream(target: Target) -> StreamShape:
    """One stream, fully checked: status, event count, [DONE], sequence numbers (gateway)."""
    result = await sseclient.post(target.proc.port, PATH, orjson.dumps(SSE_BODY))
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
    return StreamShape(len(result.events), result.done)


class Probe:
    """One stream at a time next to wrk's streams: time to first event, and full checks."""

    def __init__(self, target: Target, shape: StreamShape):
        self.target = target
        self.shape = shape
        self.stop = asyncio.Event()
        self.ttfe: list[float] = []
        self.events = 0
        self.bad = 0

    async def run(self) -> None:
        body = orjson.dumps(SSE_BODY)
        while not self.stop.is_set():
            try:
                result = await sseclient.post(self.target.proc.port, PATH, body)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                self.bad += 1
                continue
            self.events += len(result.events)
            if result.ok and result.ttfe is not None:
                self.ttfe.append(result.ttfe)
            if not result.ok or len(result.events) != self.shape.events or result.done != self.shape.done:
                self.bad += 1


async def sse(settings: Settings, target: Target, procs: dict[str, Proc]) -> SseRun:
    shape = await check_stream(target)
    script = loadgen.render("sse", {"PATH": PATH, "BODY": orjson.dumps(SSE_BODY).decode(),
                                    "EXPECTED": shape.events, "EXPECT_DONE": shape.done})
    probe = Probe(target, shape)
    result, meter = await _warm_and_measure(settings, target, script, procs, during=probe)
    counters = result.counters
    run = SseRun(**_stats(target, result, meter), streams_per_s=result.rps,
                 events_per_s=counters["events"] / result.duration_s, events_per_stream=shape.events,
                 ends_with_done=shape.done, ttfe_samples=len(probe.ttfe),
                 ttfe_p50_ms=1e3 * statistics.median(probe.ttfe) if probe.ttfe else None,
                 streams_checked=result.requests + len(probe.ttfe),
                 events_relayed=counters["events"] + probe.events)
    run.errors["bad_stream"] = counters.get("bad_body", 0) + probe.bad
    run.errors["status"] = max(run.errors["status"], counters.get("bad_status", 0))
    return run


# -- scenario 3: memory -----------------------------------------------------------------

async def memory(settings: Settings, workdir: Path, upstream: Proc) -> MemoryRun:
    """A fresh gateway's RSS before and while `memory_streams` slow streams are open."""
    gateway = start_gateway(workdir, upstream.url, name="gateway-memory")
    try:
        return await _hold_streams(gateway, settings.memory_streams)
    finally:
        gateway.stop()


async def _hold_streams(gateway: Proc, count: int) -> MemoryRun:
    body = orjson.dumps(MEMORY_BODY)
    # Warm-up: the code paths, the upstream pool and the database, once, before "before".
    warm = [asyncio.create_task(sseclient.post(gateway.port, PATH, body)) for _ in range(32)]
    await asyncio.sleep(2)
    for task in warm:
        task.cancel()
    await asyncio.gather(*warm, return_exceptions=True)
    await asyncio.sleep(1)
    rss_before = gateway.rss_kib()

    opening = asyncio.Semaphore(64)  # the gateway's listen backlog is 128
    opened = failed = 0
    settled = asyncio.Event()

    async def hold() -> None:
        nonlocal failed
        released = False

        def first_event() -> None:
            nonlocal opened, released
            opened += 1
            released = True
            opening.release()
            if opened + failed == count:
                settled.set()

        await opening.acquire()
        try:
            result = await sseclient.post(gateway.port, PATH, body, on_first_event=first_event)
            if not result.ok or result.ttfe is None:
                raise RuntimeError(f"status {result.status}")
            raise RuntimeError("the stream ended while it should have been held open")
        except asyncio.CancelledError:
            raise
        except Exception:
            if not released:  # one that ended after opening shows in `still_open` instead
                failed += 1
                if opened + failed == count:
                    settled.set()
        finally:
            if not released:
                opening.release()

    started = time.perf_counter()
    tasks = [asyncio.create_task(hold()) for _ in range(count)]
    try:
        await asyncio.wait_for(settled.wait(), timeout=120)
        open_seconds = time.perf_counter() - started
        await asyncio.sleep(1)  # every stream has had a few events relayed by now
        samples = []
        for _ in range(5):
            samples.append(gateway.rss_kib())
            await asyncio.sleep(0.2)
        still_open = sum(not task.done() for task in tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return MemoryRun(streams=count, opened=opened, failed=failed, still_open=still_open,
                     open_seconds=open_seconds, rss_before_kib=rss_before, rss_open_kib=max(samples))
