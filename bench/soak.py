"""`python -m bench.soak`: a bounded soak of one `gateway serve` on loopback (issue 42).

For `--minutes` (default 10), `--concurrency` clients (default 64) each run turns one
after the other, every turn a transport drawn at random (seeded): JSON, SSE, a
WebSocket turn, LCORE's `/v1/query` and `/v1/streaming_query`, and a background turn
polled to its end. A share of the turns (`--fault-share`, default 0.1) carries one of the
scripted upstream's fault triggers (`gateway/devserver/__init__.py`): an error status
(`fail-upstream`, `context-overflow`), a stream cut without its terminal event
(`break-stream`), an upstream's error event (`error-event`), a stream that goes quiet
(`stall-stream`) and an upstream that never answers (`hang-upstream`), the last two
ended by the gateway's `llama_stack.timeout` (2 s here).

Recorded: the gateway's resident memory and open file descriptors every 5 s (from
/proc), every turn's outcome by transport (a clean turn that did not end as it should is
an error of its kind: `http_500`, `failed_event`, `exception:ClientPayloadError`, ...;
a faulted turn's outcome is counted apart, as what the client saw), and per minute the
clean turns' p50 and p99 latency (the drift). Prints a markdown report and writes it to
`bench/results/soak.md` (git-ignored); exit status 1 when a clean turn failed, a
faulted turn was not answered (an exception), or RSS or the descriptors grew past
`--max-rss-growth-mib` / `--max-fd-growth` from the end of the first minute to the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

from bench import procs
from bench.scenarios import MODEL

RESULTS = Path(__file__).parent / "results"
TRANSPORTS = {"json": 25, "sse": 25, "websocket": 15, "query": 10, "streaming_query": 15, "background": 10}
FAULTS = ("fail-upstream", "context-overflow", "break-stream", "error-event", "stall-stream", "hang-upstream")
UPSTREAM_TIMEOUT = 2          # llama_stack.timeout: how long a stalled or hung upstream is waited for
TURN_TIMEOUT = 30             # a client gives up on a turn after this (an `exception:TimeoutError`)
SAMPLE_SECONDS = 5


@dataclass
class Turn:
    minute: int
    transport: str
    fault: str | None
    outcome: str            # "ok", or what went wrong as the client saw it
    seconds: float


@dataclass
class Sample:
    at: float
    rss_mib: float
    fds: int


@dataclass
class Soak:
    turns: list[Turn] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


# -- one turn per transport: each returns the outcome the client saw ----------------------

def _body(text: str, **extra: object) -> dict:
    return {"input": text, "model": MODEL, "tool_choice": "none", "metadata": {"scripted_deltas": "16"}, **extra}


async def _json(session: aiohttp.ClientSession, base: str, text: str) -> str:
    async with session.post(f"{base}/v1/responses", json=_body(text)) as reply:
        body = await reply.read()
        if reply.status != 200:
            return f"http_{reply.status}"
        status = orjson.loads(body).get("status")
        return "ok" if status == "completed" else f"status_{status}"


def _sse_outcome(status: int, body: bytes, terminal: bytes = b"data: [DONE]\n\n") -> str:
    if status != 200:
        return f"http_{status}"
    if not body.endswith(terminal):
        return "no_end_of_stream"
    if b"response.failed" in body:
        return "failed_event"
    if b'"event": "error"' in body:
        return "error_event"
    if b"response.incomplete" in body:
        return "incomplete_event"
    return "ok" if b"response.completed" in body or b'"event": "end"' in body else "no_terminal_event"


async def _sse(session: aiohttp.ClientSession, base: str, text: str) -> str:
    async with session.post(f"{base}/v1/responses", json=_body(text, stream=True)) as reply:
        return _sse_outcome(reply.status, await reply.read())


async def _websocket(session: aiohttp.ClientSession, base: str, text: str) -> str:
    async with session.ws_connect(base.replace("http://", "ws://") + "/v1/responses") as ws:
        await ws.send_str(orjson.dumps({"type": "response.create", **_body(text, store=False)}).decode())
        while True:
            message = await ws.receive()
            if message.type != aiohttp.WSMsgType.TEXT:
                return f"ws_{message.type.name.lower()}"
            kind = orjson.loads(message.data).get("type")
            if kind == "response.completed":
                return "ok"
            if kind in ("response.failed", "response.incomplete", "error"):
                return {"response.failed": "failed_event", "response.incomplete": "incomplete_event",
                        "error": "error_event"}[kind]


async def _query(session: aiohttp.ClientSession, base: str, text: str) -> str:
    async with session.post(f"{base}/v1/query", json={"query": text, "no_tools": True}) as reply:
        await reply.read()
        return "ok" if reply.status == 200 else f"http_{reply.status}"


async def _streaming_query(session: aiohttp.ClientSession, base: str, text: str) -> str:
    async with session.post(f"{base}/v1/streaming_query", json={"query": text, "no_tools": True}) as reply:
        body = await reply.read()
        if reply.status != 200:
            return f"http_{reply.status}"
        if b'"event": "error"' in body:
            return "error_event"
        return "ok" if b'"event": "end"' in body else "no_end_event"


async def _background(session: aiohttp.ClientSession, base: str, text: str) -> str:
    async with session.post(f"{base}/v1/responses", json=_body(text, background=True)) as reply:
        body = await reply.read()
        if reply.status != 200:
            return f"http_{reply.status}"
        response = orjson.loads(body)
    while response.get("status") in ("queued", "in_progress"):
        await asyncio.sleep(0.2)
        async with session.get(f"{base}/v1/responses/{response['id']}") as reply:
            body = await reply.read()
            if reply.status != 200:
                return f"poll_http_{reply.status}"
            response = orjson.loads(body)
    return "ok" if response.get("status") == "completed" else f"status_{response.get('status')}"


RUNNERS = {"json": _json, "sse": _sse, "websocket": _websocket, "query": _query,
           "streaming_query": _streaming_query, "background": _background}


# -- the run --------------------------------------------------------------------------

async def _client(number: int, base: str, soak: Soak, started: float, until: float, fault_share: float,
                  seed: int) -> None:
    draw = random.Random(seed * 1000 + number)
    kinds, weights = list(TRANSPORTS), list(TRANSPORTS.values())
    timeout = aiohttp.ClientTimeout(total=TURN_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        turn = 0
        while time.monotonic() < until:
            turn += 1
            transport = draw.choices(kinds, weights)[0]
            fault = draw.choice(FAULTS) if draw.random() < fault_share else None
            text = f"soak client {number} turn {turn}" + (f" {fault}" if fault else "")
            begun = time.monotonic()
            try:
                outcome = await RUNNERS[transport](session, base, text)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
                outcome = f"exception:{type(exc).__name__}"
            soak.turns.append(Turn(int((begun - started) // 60), transport, fault, outcome,
                                   time.monotonic() - begun))


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _sampler(gateway: procs.Proc, soak: Soak, started: float, until: float) -> None:
    while True:
        soak.samples.append(Sample(time.monotonic() - started, gateway.rss_kib() / 1024, _fds(gateway.pid)))
        if time.monotonic() >= until:
            return
        await asyncio.sleep(SAMPLE_SECONDS)


async def run(base: str, gateway: procs.Proc, seconds: float, concurrency: int, fault_share: float,
              seed: int) -> Soak:
    soak = Soak()
    started = time.monotonic()
    until = started + seconds
    sampler = asyncio.create_task(_sampler(gateway, soak, started, until))
    await asyncio.gather(*(_client(n, base, soak, started, until, fault_share, seed) for n in range(concurrency)))
    await asyncio.sleep(UPSTREAM_TIMEOUT + 1)   # the last turns' writes and cleanup settle
    soak.samples.append(Sample(time.monotonic() - started, gateway.rss_kib() / 1024, _fds(gateway.pid)))
    await sampler
    return soak


def start(workdir: Path) -> tuple[procs.Proc, procs.Proc]:
    upstream = procs.start_upstream(workdir)
    gateway = procs.start_gateway(workdir, upstream.url, extra={
        "llama_stack": {"url": upstream.url, "max_retries": 0, "max_connections": 4096,
                        "timeout": UPSTREAM_TIMEOUT, "circuit_breaker_failures": 0}},
        # One noop user runs every client: the per-user caps must not refuse the soak.
        service={"max_responses_in_progress_per_user": 1_000_000,
                 "websocket": {"max_connections_per_user": 10_000}})
    return upstream, gateway


# -- the report -----------------------------------------------------------------------

def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


@dataclass
class Verdict:
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures


def judge(soak: Soak, max_rss_growth_mib: float, max_fd_growth: int) -> Verdict:
    failures = []
    clean_errors = Counter(turn.outcome for turn in soak.turns if turn.fault is None and turn.outcome != "ok")
    if clean_errors:
        failures.append(f"clean turns that failed: {dict(clean_errors)}")
    unanswered = Counter(turn.outcome for turn in soak.turns if turn.fault and turn.outcome.startswith("exception"))
    if unanswered:
        failures.append(f"faulted turns without an answer: {dict(unanswered)}")
    settled = [sample for sample in soak.samples if sample.at >= 60] or soak.samples
    if settled:
        rss = soak.samples[-1].rss_mib - settled[0].rss_mib
        fds = soak.samples[-1].fds - settled[0].fds
        if rss > max_rss_growth_mib:
            failures.append(f"RSS grew {rss:.1f} MiB after the first minute (limit {max_rss_growth_mib})")
        if fds > max_fd_growth:
            failures.append(f"open descriptors grew by {fds} after the first minute (limit {max_fd_growth})")
    return Verdict(failures)


def render(soak: Soak, args: argparse.Namespace, verdict: Verdict) -> str:
    lines = [f"# Soak: {args.minutes:g} min, {args.concurrency} clients, {args.fault_share:.0%} of turns faulted "
             f"(seed {args.seed})", ""]
    turns = soak.turns
    lines += [f"{len(turns)} turns ({len(turns) / (args.minutes * 60):.0f}/s), "
              f"{sum(1 for turn in turns if turn.fault)} with a fault. Verdict: "
              + ("**pass**" if verdict.ok else "**FAIL**: " + "; ".join(verdict.failures)), ""]
    lines += ["## Per minute (clean turns)", "", "| minute | turns | p50 ms | p99 ms | errors | RSS MiB (end) | fds (end) |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    by_minute: dict[int, list[Turn]] = defaultdict(list)
    for turn in turns:
        by_minute[turn.minute].append(turn)
    for minute in sorted(by_minute):
        clean = [turn for turn in by_minute[minute] if turn.fault is None]
        latencies = [turn.seconds * 1000 for turn in clean]
        errors = sum(1 for turn in clean if turn.outcome != "ok")
        sample = max((s for s in soak.samples if s.at < (minute + 1) * 60), key=lambda s: s.at, default=None)
        lines.append(f"| {minute + 1} | {len(clean)} | {_percentile(latencies, 0.5):.0f} | "
                     f"{_percentile(latencies, 0.99):.0f} | {errors} | "
                     f"{sample.rss_mib if sample else float('nan'):.1f} | {sample.fds if sample else '-'} |")
    lines += ["", "## Outcomes by transport", "", "| transport | clean ok | clean errors | faulted: what the client saw |",
              "|---|---:|---|---|"]
    for transport in TRANSPORTS:
        mine = [turn for turn in turns if turn.transport == transport]
        clean_ok = sum(1 for turn in mine if turn.fault is None and turn.outcome == "ok")
        clean_bad = Counter(turn.outcome for turn in mine if turn.fault is None and turn.outcome != "ok")
        faulted = Counter(turn.outcome for turn in mine if turn.fault)
        lines.append(f"| {transport} | {clean_ok} | {_counts(clean_bad) or '0'} | {_counts(faulted)} |")
    lines += ["", "## Faults: what the client saw, and how long it took", "",
              "| fault | turns | outcomes | p50 ms | p99 ms |", "|---|---:|---|---:|---:|"]
    for fault in FAULTS:
        mine = [turn for turn in turns if turn.fault == fault]
        latencies = [turn.seconds * 1000 for turn in mine]
        lines.append(f"| `{fault}` | {len(mine)} | {_counts(Counter(turn.outcome for turn in mine))} | "
                     f"{_percentile(latencies, 0.5):.0f} | {_percentile(latencies, 0.99):.0f} |")
    if soak.samples:
        first, last = soak.samples[0], soak.samples[-1]
        peak = max(soak.samples, key=lambda s: s.rss_mib)
        lines += ["", f"RSS: {first.rss_mib:.1f} MiB at the start, peak {peak.rss_mib:.1f} MiB at "
                      f"{peak.at:.0f} s, {last.rss_mib:.1f} MiB at the end; open descriptors {first.fds} → "
                      f"{last.fds} (peak {max(s.fds for s in soak.samples)}). Sampled every {SAMPLE_SECONDS} s."]
    return "\n".join(lines) + "\n"


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counter.most_common())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10, help="how long (default 10)")
    parser.add_argument("--concurrency", type=int, default=64, help="clients at once (default 64)")
    parser.add_argument("--fault-share", type=float, default=0.1, help="share of turns with a fault (default 0.1)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max-rss-growth-mib", type=float, default=64)
    parser.add_argument("--max-fd-growth", type=int, default=32)
    parser.add_argument("--output", type=Path, default=RESULTS / "soak.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    procs.raise_open_files()
    with tempfile.TemporaryDirectory(prefix="gateway-soak-") as tmp:
        upstream, gateway = start(Path(tmp))
        try:
            soak = asyncio.run(run(gateway.url, gateway, args.minutes * 60, args.concurrency, args.fault_share,
                                   args.seed))
        finally:
            gateway.stop()
            upstream.stop()
    verdict = judge(soak, args.max_rss_growth_mib, args.max_fd_growth)
    text = render(soak, args, verdict)
    print(text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
