"""The `forms` workload: what `conversation` in OpenAI's object form (`{"id": ...}`,
`service.conversation_form: object`) costs the SSE fast path against the string form.

Two gateways started alike but for `service.conversation_form`, on the gateway core,
measured in interleaved pairs as the `metrics` workload is (each round runs both, in
alternating order). Scenario: SSE bulk (scenario 2) in each dialect. Text deltas carry
no response object, so the form only changes the events that do (`response.created`,
`in_progress`, the terminal one): the target is that the object form's CPU per event
stays within 1.03× of the string form's (median of the per-round ratios).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bench import procs, scenarios
from bench.report import Verdict
from bench.scenarios import Run, Settings, Target

MAX_RATIO = 1.03
VARIANTS = ("string", "object")


@dataclass
class FormRuns:
    runs: dict[str, dict[str, list[Run]]] = field(default_factory=dict)   # scenario → form → runs


async def forms_workload(settings: Settings, upstream: procs.Proc, workdir: Path, rounds: int,
                         dialects: list[str]) -> FormRuns:
    gateways: dict[str, procs.Proc] = {}
    results = FormRuns()
    try:
        for form in VARIANTS:
            gateways[form] = procs.start_gateway(workdir, upstream.url, name=f"gateway-form-{form}",
                                                 service={"conversation_form": form})
        for round_ in range(rounds):
            order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
            for dialect in dialects:
                scenario = f"SSE bulk, {dialect}"
                for form in order:
                    print(f"bench: forms, {scenario}, {form}, round {round_ + 1}/{rounds}", flush=True)
                    run = await scenarios.sse_bulk(settings, Target("gateway", gateways[form]), upstream, dialect)
                    if run.errors:
                        raise RuntimeError(f"forms, {scenario}, {form}: {run.errors} requests failed")
                    results.runs.setdefault(scenario, {}).setdefault(form, []).append(run)
    finally:
        for proc in gateways.values():
            proc.stop()
    return results


def render(results: FormRuns, verdicts: list[Verdict]) -> list[str]:
    lines = ["## `conversation` form: object (`{\"id\"}`) against string (interleaved pairs)", "",
             "| scenario | CPU µs per event, string | CPU µs per event, object | object / string (median of rounds) "
             "| per-round ratios |", "|---|--:|--:|--:|---|"]
    for scenario, forms in results.runs.items():
        string, obj = forms["string"], forms["object"]
        ratios = [a.cpu_us / b.cpu_us for a, b in zip(obj, string)]
        ratio = statistics.median(ratios)
        lines.append(f"| {scenario} | {statistics.median(r.cpu_us for r in string):.2f} | "
                     f"{statistics.median(r.cpu_us for r in obj):.2f} | {ratio:.3f} | "
                     f"{', '.join(f'{value:.3f}' for value in ratios)} |")
        verdicts.append(Verdict(f"conversation object form ≤ {MAX_RATIO}× string form, CPU per event ({scenario})",
                                ratio <= MAX_RATIO, f"{ratio:.3f}×"))
    return lines + [""]
