"""Turn the runs into the markdown table (printed and written to bench/results/latest.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.scenarios import SSE_DELTAS, JsonRun, MemoryRun, SseRun

# The targets from the benchmark's issue.
SSE_MIN_RATIO = 0.40
JSON_MIN_RATIO = 0.30
MEMORY_MAX_KIB = 35.0


@dataclass
class Results:
    header: dict[str, str]
    json_new: tuple[JsonRun, JsonRun] | None = None        # (direct, gateway)
    json_continue: tuple[JsonRun, JsonRun] | None = None
    sse: tuple[SseRun, SseRun] | None = None
    memory: MemoryRun | None = None
    profile: str | None = None
    notes: list[str] = field(default_factory=list)
    rounds: dict[str, list[float]] = field(default_factory=dict)  # scenario -> gateway/direct per pair


@dataclass
class Verdict:
    name: str
    ok: bool
    detail: str


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    return "—" if value is None else (f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms")


def _pass(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def _errors(run: JsonRun | SseRun) -> str:
    if not run.error_count:
        return "0"
    return f"{run.error_count} (" + ", ".join(f"{k} {v}" for k, v in run.errors.items() if v) + ")"


def _backlog_rows(run: JsonRun | SseRun, unit: str, per: float) -> list[str]:
    if not run.gateway_drain_cpu_s:
        return []
    return [f"| | gateway backlog after the run (background persistence) | — | busy {run.drain_s:.1f} s more, "
            f"+{_n(1e6 * run.gateway_drain_cpu_s / per, 1 if unit == 'event' else 0)} µs CPU per {unit} | | | |"]


def _rate_rows(name: str, direct_rate: float, gateway_rate: float, sustained: float, minimum: float,
               verdicts: list[Verdict], verdict_name: str) -> list[str]:
    """The measured rate; when the gateway left work behind, also the rate that counts it,
    which is the one checked (a backlog that grows without bound is not throughput)."""
    measured = gateway_rate / direct_rate if direct_rate else 0.0
    checked = sustained / direct_rate if direct_rate else 0.0
    ok = checked >= minimum
    verdicts.append(Verdict(verdict_name, ok, f"{checked:.1%}" + (
        f" (counting the backlog; {measured:.1%} as measured by wrk)" if sustained < gateway_rate else "")))
    if sustained >= gateway_rate:
        return [f"| {{label}} | {name} | {_n(direct_rate)} | {_n(gateway_rate)} | {measured:.1%} "
                f"| ≥ {minimum:.0%} | {_pass(ok)} |"]
    return [f"| {{label}} | {name} (wrk) | {_n(direct_rate)} | {_n(gateway_rate)} | {measured:.1%} | | |",
            f"| | {name} counting the backlog ¹ | {_n(direct_rate)} | {_n(sustained)} | {checked:.1%} "
            f"| ≥ {minimum:.0%} | {_pass(ok)} |"]


def _json_rows(label: str, pair: tuple[JsonRun, JsonRun], verdicts: list[Verdict]) -> list[str]:
    direct, gateway = pair
    rows = _rate_rows("requests/s", direct.rps, gateway.rps, gateway.sustained_rps, JSON_MIN_RATIO, verdicts,
                      f"JSON ({label}) ≥ {JSON_MIN_RATIO:.0%} of direct requests/s")
    rows[0] = rows[0].replace("{label}", label)
    cpu = gateway.gateway_cpu_us_per_request or 0.0
    return rows + [
        f"| | latency p50 | {_ms(direct.p50_ms)} | {_ms(gateway.p50_ms)} | | | |",
        f"| | latency p99 | {_ms(direct.p99_ms)} | {_ms(gateway.p99_ms)} | | | |",
        f"| | gateway CPU per request (during the run) | — | {_n(cpu)} µs | | | |",
        *_backlog_rows(gateway, "request", gateway.requests),
        f"| | errors (non-200, socket) | {_errors(direct)} of {_n(direct.requests)} "
        f"| {_errors(gateway)} of {_n(gateway.requests)} | | | |",
    ]


def _sse_rows(pair: tuple[SseRun, SseRun], verdicts: list[Verdict]) -> list[str]:
    direct, gateway = pair
    label = f"SSE: {SSE_DELTAS}-delta streams, 32 concurrent"
    rows = _rate_rows("events/s", direct.events_per_s, gateway.events_per_s, gateway.sustained_events_per_s,
                      SSE_MIN_RATIO, verdicts, f"SSE ≥ {SSE_MIN_RATIO:.0%} of direct events/s")
    rows[0] = rows[0].replace("{label}", label)

    def shape(run: SseRun) -> str:
        return f"{run.events_per_stream}" + (" + `[DONE]`" if run.ends_with_done else " (no `[DONE]`)")

    cpu = gateway.gateway_cpu_us_per_event or 0.0
    return rows + [
        f"| | streams/s | {_n(direct.streams_per_s)} | {_n(gateway.streams_per_s)} | "
        f"{gateway.streams_per_s / direct.streams_per_s:.1%} | | |",
        f"| | events per stream | {shape(direct)} | {shape(gateway)} | | | |",
        f"| | time to first event p50 (probe stream, {direct.ttfe_samples} / {gateway.ttfe_samples} samples) "
        f"| {_ms(direct.ttfe_p50_ms)} | {_ms(gateway.ttfe_p50_ms)} | | | |",
        f"| | gateway CPU per relayed event (during the run) | — | {cpu:.2f} µs | | | |",
        *_backlog_rows(gateway, "event", gateway.events_relayed),
        f"| | bad streams + errors (every stream checked) | {_errors(direct)} of {_n(direct.streams_checked)} "
        f"| {_errors(gateway)} of {_n(gateway.streams_checked)} | | | |",
    ]


def _memory_rows(run: MemoryRun, verdicts: list[Verdict]) -> list[str]:
    ok = run.kib_per_stream <= MEMORY_MAX_KIB and run.opened == run.streams and run.still_open == run.streams
    verdicts.append(Verdict(f"≤ {MEMORY_MAX_KIB:.0f} KiB per open stream", ok,
                            f"{run.kib_per_stream:.1f} KiB ({run.opened}/{run.streams} open)"))
    return [
        f"| Memory: {run.streams} slow streams held open via the gateway | KiB per open stream | — "
        f"| {run.kib_per_stream:.1f} KiB | | ≤ {MEMORY_MAX_KIB:.0f} KiB | {_pass(ok)} |",
        f"| | gateway RSS before → all open | — | {run.rss_before_kib / 1024:.1f} → "
        f"{run.rss_open_kib / 1024:.1f} MiB | | | |",
        f"| | streams open / failed / ended early | — | {run.opened} / {run.failed} / "
        f"{run.streams - run.still_open} (opened in {run.open_seconds:.1f} s) | | | |",
    ]


def _cpu_table(results: Results) -> list[str]:
    rows = ["| run | gateway (core 0) | upstream (core 1) | wrk (core 1) | bench + probe (core 1) "
            "| core 0 busy | core 1 busy |",
            "|---|--:|--:|--:|--:|--:|--:|"]
    runs: list[tuple[str, JsonRun | SseRun]] = []
    for label, pair in (("JSON new conversation", results.json_new), ("JSON continuing", results.json_continue),
                        ("SSE", results.sse)):
        if pair:
            runs += [(f"{label}, {run.target}", run) for run in pair]
    for label, run in runs:
        pct = run.cpu_pct
        rows.append(f"| {label} | {pct.get('gateway', 0):.0f} % | {pct.get('upstream', 0):.0f} % "
                    f"| {pct.get('wrk', 0):.0f} % | {pct.get('bench', 0):.0f} % "
                    f"| {pct.get('core 0', 0):.0f} % | {pct.get('core 1', 0):.0f} % |")
    return rows


def _disturbances(results: Results) -> list[str]:
    """Runs during which a core did more than the processes we put on it account for."""
    found = []
    for label, pair in (("JSON new-conversation", results.json_new), ("JSON continuing", results.json_continue),
                        ("SSE", results.sse)):
        for run in pair or ():
            pct = run.cpu_pct
            ours = {"core 0": pct.get("gateway", 0),
                    "core 1": pct.get("upstream", 0) + pct.get("wrk", 0) + pct.get("bench", 0)}
            for core, mine in ours.items():
                if pct.get(core, 0) - mine > 10:
                    found.append(f"**disturbed**: during the {label} {run.target} run, {core} was "
                                 f"{pct[core]:.0f} % busy but the benchmark's processes there used {mine:.0f} %: "
                                 f"something else on the machine was running; rerun on a quiet machine")
    return found


def render(results: Results) -> tuple[str, list[Verdict]]:
    verdicts: list[Verdict] = []
    lines = ["# Gateway benchmark", ""]
    lines += [f"- **{key}**: {value}" for key, value in results.header.items()]
    lines += ["", "| Scenario | Metric | Direct | Gateway | Gateway / direct | Target | Result |",
              "|---|---|--:|--:|--:|---|---|"]
    if results.json_new:
        lines += _json_rows("JSON, a new conversation every request, 32 clients", results.json_new, verdicts)
    if results.json_continue:
        lines += _json_rows("JSON, each client continues its own conversation, 32 clients",
                            results.json_continue, verdicts)
    if results.sse:
        lines += _sse_rows(results.sse, verdicts)
    if results.memory:
        lines += _memory_rows(results.memory, verdicts)
    if any(run.gateway_drain_cpu_s for pair in (results.json_new, results.json_continue, results.sse)
           for run in pair or ()):
        lines += ["", "¹ The gateway answers before it has persisted the turn; under this load the background "
                  "persistence falls behind and finishes after the run. Counting that CPU: the run's requests "
                  "(events) ÷ the gateway's CPU seconds during and after the run, i.e. the rate its one core "
                  "sustains without a growing backlog. This is the rate the target is checked on."]
    lines += ["", "## Targets", ""]
    lines += [f"- {_pass(v.ok)} {v.name}: {v.detail}" for v in verdicts]
    passed = sum(v.ok for v in verdicts)
    lines += ["", f"{passed} of {len(verdicts)} targets pass.", "",
              "## CPU during the measured runs (% of one core)", "",
              "The direct baseline is limited by core 1 (upstream + wrk): wrk's share shows how much "
              "of it the generator takes. Through the gateway, core 0 at ~100 % means the gateway "
              "is the bottleneck. A core busier than the processes on it adds up to means something "
              "else on the machine ran there during the run.", ""]
    lines += _cpu_table(results)
    notes = list(results.notes) + _disturbances(results)
    notes += [f"{name}: gateway/direct in each of {len(ratios)} back-to-back pairs: "
              + ", ".join(f"{ratio:.1%}" for ratio in ratios) + " (the table shows the median pair)"
              for name, ratios in results.rounds.items()]
    for pair in (results.json_new, results.json_continue, results.sse):
        for run in pair or ():
            notes += [f"{run.target}: {note}" for note in run.notes]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    if results.profile:
        lines += ["", results.profile]
    return "\n".join(lines) + "\n", verdicts
