"""The `legacy` workload: LCORE's `/v1/streaming_query` beside `/v1/responses`
streaming, on the same gateway and the same upstream, per upstream dialect.

Both stream the same reply: the scripted model repeats the query after its 5-word
prefix, one delta per word, so a 59-word query is a 64-delta answer in either
dialect (a `QueryRequest` has no `metadata` for the upstream's knobs; the dialect is
the upstream's default, one upstream per dialect). No tools on either (`no_tools`,
`tool_choice: none`). wrk drives both, as SSE bulk (scenario 2) does; the figure is the
gateway's CPU per **token event** (per text delta: a `response.output_text.delta` or a
`token`), the whole stream's cost divided by its deltas. Target: the legacy stream's
within 1.2× of the Responses stream's (median of the rounds' ratios).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench import loadgen, procs, sseclient
from bench.report import Verdict
from bench.scenarios import MODEL, Run, Settings, Target, _run, _wrk

MAX_RATIO = 1.2
QUERY = " ".join(f"word{n}" for n in range(59))
STREAMS = {
    "responses": ("/v1/responses", {"input": QUERY, "model": MODEL, "stream": True, "tool_choice": "none"}, True),
    "streaming_query": ("/v1/streaming_query", {"query": QUERY, "no_tools": True}, False),
}
_TOKEN_EVENTS = (b'"type":"response.output_text.delta"', b'"event": "token"')


@dataclass
class LegacyRuns:
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)   # (dialect, stream) -> runs
    tokens: dict[tuple[str, str], int] = field(default_factory=dict)       # token events per stream


async def _check(target: Target, path: str, body: dict) -> tuple[int, int]:
    """One stream: its events and its token events."""
    result = await sseclient.post(target.proc.port, path, orjson.dumps(body))
    if not result.ok or not result.events:
        raise RuntimeError(f"legacy: {path} answered {result.status}: {result.body[:300]!r}")
    tokens = sum(1 for event in result.events if any(mark in event for mark in _TOKEN_EVENTS))
    return len(result.events), tokens


async def _stream_run(settings: Settings, target: Target, upstream: procs.Proc, path: str, body: dict,
                      done: bool) -> tuple[Run, int]:
    events, tokens = await _check(target, path, body)
    script = loadgen.render("sse", {"PATH": path, "BODY": orjson.dumps(body).decode(), "EXPECTED": events,
                                    "EXPECT_DONE": done})
    result, usage = await _wrk(settings, target, upstream, script)
    good = result.counters.get("good", 0)
    run = _run(target, usage, good * tokens, result.duration_s,
               errors=result.error_count + result.counters.get("bad_body", 0) + result.counters.get("bad_status", 0),
               checked=result.requests)
    return run, tokens


async def legacy_workload(settings: Settings, workdir: Path, rounds: int, dialects: list[str]) -> LegacyRuns:
    results = LegacyRuns()
    for dialect in dialects:
        upstream = procs.start_upstream(workdir, False, "--dialect", dialect, name=f"upstream-legacy-{dialect}")
        gateway = None
        try:
            gateway = procs.start_gateway(workdir, upstream.url, name=f"gateway-legacy-{dialect}")
            target = Target("gateway", gateway)
            for round_ in range(rounds):
                order = list(STREAMS) if round_ % 2 == 0 else list(reversed(STREAMS))
                for name in order:
                    print(f"bench: legacy, {dialect}, {name}, round {round_ + 1}/{rounds}", flush=True)
                    path, body, done = STREAMS[name]
                    run, tokens = await _stream_run(settings, target, upstream, path, body, done)
                    if run.errors:
                        raise RuntimeError(f"legacy, {dialect}, {name}: {run.errors} streams failed")
                    results.runs.setdefault((dialect, name), []).append(run)
                    results.tokens[(dialect, name)] = tokens
        finally:
            for proc in (gateway, upstream):
                if proc is not None:
                    proc.stop()
    return results


def render(results: LegacyRuns, verdicts: list[Verdict]) -> list[str]:
    lines = ["## Legacy streams: `/v1/streaming_query` beside `/v1/responses` streaming (same gateway, "
             "same upstream)", "",
             "| upstream dialect | stream | token events per stream | CPU µs per token event: median (each round) "
             "| streams/s | / Responses' (median of the rounds' ratios) |",
             "|---|---|--:|--:|--:|--:|"]
    for (dialect, name), runs in results.runs.items():
        cpu = statistics.median(run.cpu_us for run in runs)
        each = ", ".join(f"{run.cpu_us:.1f}" for run in runs)
        tokens = results.tokens[(dialect, name)]
        streams = statistics.median(run.rate for run in runs) / max(tokens, 1)
        shown = "—"
        if name == "streaming_query":
            ratio = statistics.median(run.cpu_us / base.cpu_us for run, base in
                                      zip(runs, results.runs[(dialect, "responses")]))
            shown = f"{ratio:.2f}×"
            verdicts.append(Verdict(f"legacy, {dialect}: /v1/streaming_query CPU per token event ≤ {MAX_RATIO}× "
                                    "/v1/responses'", ratio <= MAX_RATIO, shown))
        lines.append(f"| {dialect} | {name} | {tokens} | {cpu:.1f} ({each}) | {streams:,.0f} | {shown} |")
    return lines + [""]
