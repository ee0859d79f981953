"""The local-engine scenario (`--only engine`): the Responses API run by the gateway over
a zero-delay Chat Completions upstream, against that upstream's chat chunks direct and
against Llama Stack 0.7.3's own Responses implementation over the same upstream.

All three stream 64 text pieces (the upstream runs with `--chat-deltas 64`, since
Llama Stack does not forward `metadata`), wrk with 32 connections. Figures: events/s
out of each target and its CPU µs per event (a chat chunk direct, a Responses event
through the gateway and Llama Stack). Targets: the gateway's events/s ≥ 0.25× the
direct chunk rate and ≥ 10× Llama Stack's. Llama Stack is installed by
`scripts/llama-stack/setup.sh` when it is missing (left out, with a note, if that fails).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench import engine_mcp, loadgen, procs, sseclient
from bench.procs import Proc
from bench.scenarios import INPUT, Run, Settings, Target, _run, _wrk

DELTAS = 64
MIN_OF_DIRECT = 0.25
MIN_OF_LLAMA_STACK = 10.0
CHAT_BODY = {"model": "scripted-chat", "stream": True, "stream_options": {"include_usage": True},
             "messages": [{"role": "user", "content": INPUT}]}


@dataclass
class PathTarget(Target):
    path: str = "/v1/responses"

    @property
    def url(self) -> str:
        return self.proc.url + self.path


def _body(target: str) -> dict:
    if target == "direct":
        return CHAT_BODY
    model = "scripted/scripted-chat" if target == "llama-stack" else "scripted-chat"
    return {"input": INPUT, "model": model, "stream": True}


async def _count(target: PathTarget) -> tuple[int, bool]:
    """One stream, checked: its number of events and whether it ends with [DONE]."""
    result = await sseclient.post(target.proc.port, target.path, orjson.dumps(_body(target.name)))
    if not result.ok or not result.events:
        raise RuntimeError(f"{target.name}: a stream answered {result.status}: {result.body[:500]!r}")
    if target.name == "gateway-engine":
        problems = sseclient.sequence_problems(result.events)
        last = orjson.loads(result.events[-1]).get("type")
        if problems or last != "response.completed" or not result.done:
            raise RuntimeError(f"engine stream is malformed: {problems} last={last!r} done={result.done}")
    return len(result.events), result.done


async def _stream_run(settings: Settings, target: PathTarget, upstream: Proc) -> Run:
    events, done = await _count(target)
    script = loadgen.render("sse", {"PATH": target.path, "BODY": orjson.dumps(_body(target.name)).decode(),
                                    "EXPECTED": events, "EXPECT_DONE": done})
    result, usage = await _wrk(settings, target, upstream, script)
    counters = result.counters
    return _run(target, usage, counters["events"], result.duration_s,
                errors=result.error_count + counters.get("bad_body", 0) + counters.get("bad_status", 0),
                checked=result.requests)


def _start_llama_stack(workdir: Path, upstream: Proc) -> Proc | None:
    """Llama Stack 0.7.3 on the gateway's core, over the same upstream, installed by the
    project's script when it is missing; None when that fails."""
    from tests.support.llama_stack import SETUP_SCRIPT, llama_stack_installed, start_llama_stack

    if not llama_stack_installed():
        print(f"bench: Llama Stack 0.7.3 is not installed; running {SETUP_SCRIPT} (about a minute)", flush=True)
        if subprocess.run([str(SETUP_SCRIPT)], cwd=procs.ROOT).returncode != 0 or not llama_stack_installed():
            print("bench: the Llama Stack install failed; its column is left out", flush=True)
            return None
    home = workdir / "llama-stack"
    home.mkdir(parents=True, exist_ok=True)
    port = procs.free_port()
    stack = start_llama_stack(home, upstream.url, home, port=port, ghost_model=False)
    # Every thread of it on the measured core (taskset -a), as the gateway runs there.
    subprocess.run(["taskset", "-a", "-p", "-c", procs.GATEWAY_CORE, str(stack.popen.pid)],
                   check=True, capture_output=True)
    return Proc("llama-stack", stack.popen, port, Path(stack.log_path))


async def engine_scenario(settings: Settings, workdir: Path, rounds: int) -> tuple[list[str], list[tuple[str, bool, str]]]:
    """The scenario's report rows and verdicts (name, ok, detail)."""
    upstream = procs.start_upstream(workdir, False, "--chat-deltas", str(DELTAS), name="chat-upstream")
    gateway = mcp_gateway = stack = mcp = None
    try:
        gateway = procs.start_gateway(workdir, upstream.url, name="gateway-engine", api="chat_completions")
        targets = [PathTarget("direct", upstream, "/v1/chat/completions"), PathTarget("gateway-engine", gateway)]
        # The MCP round trip: its own gateway (configured servers join every request
        # that names no tools, which would change the stream workload above).
        mcp = procs.start_mcp_server(workdir)
        mcp_gateway = procs.start_gateway(workdir, upstream.url, name="gateway-mcp", api="chat_completions",
                                          extra={"mcp_servers": engine_mcp.gateway_servers(mcp)})
        mcp_targets = [Target("gateway-mcp", mcp_gateway)]
        stack = _start_llama_stack(workdir, upstream)
        if stack is not None:
            targets.append(PathTarget("llama-stack", stack))
            mcp_targets.append(Target("llama-stack", stack))
        runs: dict[str, list[Run]] = {}
        mcp_runs: dict[str, list[Run]] = {}
        for round_ in range(rounds):
            for target in targets:
                print(f"bench: engine, {target.name}, round {round_ + 1}/{rounds}", flush=True)
                runs.setdefault(target.name, []).append(await _stream_run(settings, target, upstream))
            for target in mcp_targets:
                print(f"bench: engine, MCP round trip, {target.name}, round {round_ + 1}/{rounds}", flush=True)
                mcp_runs.setdefault(target.name, []).append(await engine_mcp.mcp_run(settings, target, upstream, mcp))
    finally:
        for proc in (stack, mcp_gateway, gateway, mcp, upstream):
            if proc is not None:
                proc.stop()
    rows, verdicts = _report(runs)
    return rows + engine_mcp.report(mcp_runs, _median), verdicts


def _median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _report(runs: dict[str, list[Run]]) -> tuple[list[str], list[tuple[str, bool, str]]]:
    names = {"direct": "upstream chat chunks, direct", "gateway-engine": "gateway, local engine",
             "llama-stack": "Llama Stack 0.7.3 Responses"}
    rows = ["", "## Local engine (64-piece streams, 32 connections)", "",
            "| target | events/s | CPU µs per event | errors (of streams) |", "|---|--:|--:|--:|"]
    for name, target_runs in runs.items():
        rows.append(f"| {names[name]} | {_median([r.rate for r in target_runs]):,.0f} | "
                    f"{_median([r.cpu_us for r in target_runs]):.1f} | "
                    f"{sum(r.errors for r in target_runs)} of {sum(r.checked for r in target_runs)} |")
    verdicts = []
    engine_rate = _median([r.rate for r in runs["gateway-engine"]])
    direct_rate = _median([r.rate for r in runs["direct"]])
    ratio = engine_rate / direct_rate if direct_rate else 0.0
    verdicts.append((f"local engine events/s ≥ {MIN_OF_DIRECT:g}× the direct chat chunk rate",
                     ratio >= MIN_OF_DIRECT, f"{ratio:.2f}×"))
    if "llama-stack" in runs:
        stack_rate = _median([r.rate for r in runs["llama-stack"]])
        ratio = engine_rate / stack_rate if stack_rate else float("inf")
        verdicts.append((f"local engine events/s ≥ {MIN_OF_LLAMA_STACK:g}× Llama Stack's", ratio >= MIN_OF_LLAMA_STACK,
                         f"{ratio:.1f}×"))
    else:
        rows.append("")
        rows.append("Llama Stack could not be installed (scripts/llama-stack/setup.sh): its row is missing.")
    return rows, verdicts
