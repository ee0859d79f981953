"""The engine scenario's MCP round trip (`--only engine`): one turn that lists an MCP
server's tools, has the model call one, runs the call and streams the model's answer,
through the gateway's local engine and through Llama Stack 0.7.3's own loop, over the
same scripted Chat Completions upstream and the same MCP server.

The MCP server is `bench.mcp_server` (the `mcp` package's FastMCP server, `add` answers
at once) on the load core. Each turn is two chat requests (the tool call, then the
answer) and the MCP traffic of a listing and a call: the gateway opens a session for
each (initialize, then `tools/list`, or `tools/call`: the call's session is told the
listed tool, so the `mcp` client does not list again to validate structured output;
`bench/mcp_call.py` times that alone); Llama Stack makes its own MCP requests. wrk
keeps 8 turns going; a probe next to it times the first event of one turn at a time.
Figures: turns/s, CPU ms per turn of the target, time to first event.
"""

from __future__ import annotations

import dataclasses
import statistics

import orjson

from bench import loadgen, sseclient
from bench.procs import Proc
from bench.scenarios import Probe, Run, Settings, Target, _run, _wrk

MCP_INPUT = "Use the add tool with 2 and 3"
LABEL = "calc"
# Turns in flight: enough to keep the target's core busy (a turn waits on the MCP server
# and the upstream on the other core), few enough that a turn still ends within a run.
CONNECTIONS = 8


def body(target: str, mcp_url: str) -> dict:
    """The gateway names its configured server; Llama Stack is given the URL."""
    if target == "llama-stack":
        return {"input": MCP_INPUT, "model": "scripted/scripted-chat", "stream": True,
                "tools": [{"type": "mcp", "server_label": LABEL, "server_url": mcp_url}]}
    return {"input": MCP_INPUT, "model": "scripted-chat", "stream": True,
            "tools": [{"type": "mcp", "server_label": LABEL}]}


def gateway_servers(mcp: Proc) -> list[dict]:
    return [{"name": LABEL, "url": mcp.url + "/mcp"}]


async def _check(target: Target, payload: bytes) -> tuple[int, bool]:
    """One turn, checked: it called the tool and got 5 back. Its events and [DONE]."""
    result = await sseclient.post(target.proc.port, "/v1/responses", payload)
    if not result.ok or not result.events:
        raise RuntimeError(f"{target.name}: an MCP turn answered {result.status}: {result.body[:500]!r}")
    last = orjson.loads(result.events[-1])
    output = (last.get("response") or {}).get("output") or []
    calls = [item for item in output if item.get("type") == "mcp_call"]
    if last.get("type") != "response.completed" or len(calls) != 1 or calls[0].get("output") != "5":
        raise RuntimeError(f"{target.name}: the MCP turn did not run the tool: {result.events[-1][:1500]!r}")
    return len(result.events), result.done


async def mcp_run(settings: Settings, target: Target, upstream: Proc, mcp: Proc) -> Run:
    payload = orjson.dumps(body(target.name, mcp.url + "/mcp"))
    events, done = await _check(target, payload)
    script = loadgen.render("sse", {"PATH": "/v1/responses", "BODY": payload.decode(), "EXPECTED": events,
                                    "EXPECT_DONE": done})
    probe = Probe(target, payload, events)
    result, usage = await _wrk(dataclasses.replace(settings, connections=CONNECTIONS), target, upstream, script,
                               probe=probe, peers={"mcp": mcp})
    counters = result.counters
    return _run(target, usage, counters.get("good", 0) + len(probe.ttfe), result.duration_s,
                errors=result.error_count + counters.get("bad_body", 0) + counters.get("bad_status", 0) + probe.bad,
                checked=result.requests + len(probe.ttfe),
                p50_ms=statistics.median(probe.ttfe) if probe.ttfe else None,
                p90_ms=statistics.quantiles(probe.ttfe, n=10)[-1] if len(probe.ttfe) >= 2 else None)


def report(runs: dict[str, list[Run]], median) -> list[str]:
    """The MCP round trip's rows (medians over the rounds)."""
    names = {"gateway-mcp": "gateway, local engine", "llama-stack": "Llama Stack 0.7.3's own loop"}
    rows = ["", f"## Local engine, an MCP round trip (a listing, a call, two chat rounds; {CONNECTIONS} connections)", "",
            "| target | turns/s | CPU ms per turn | time to first event p50 / p90 | errors (of turns) |",
            "|---|--:|--:|--:|--:|"]
    for name, target_runs in runs.items():
        p50 = [r.p50_ms for r in target_runs if r.p50_ms is not None]
        p90 = [r.p90_ms for r in target_runs if r.p90_ms is not None]
        ttfe = f"{median(p50):.1f} / {median(p90):.1f} ms" if p50 and p90 else "—"
        rows.append(f"| {names[name]} | {median([r.rate for r in target_runs]):,.1f} | "
                    f"{median([r.cpu_us for r in target_runs]) / 1e3:.2f} | {ttfe} | "
                    f"{sum(r.errors for r in target_runs)} of {sum(r.checked for r in target_runs)} |")
    if "gateway-mcp" in runs and "llama-stack" in runs:
        engine = median([r.rate for r in runs["gateway-mcp"]])
        stack = median([r.rate for r in runs["llama-stack"]])
        rows += ["", f"The engine ran {engine / stack:.1f}× Llama Stack's turns/s." if stack else ""]
    return rows
