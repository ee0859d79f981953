"""The `observability` section. LCORE fills its `otel` block from the standard `OTEL_*`
environment variables and the YAML plays no role in tracing; here too tracing reads
`OTEL_*` alone (gateway/observability/tracing.py), so `otel` is accepted and ignored."""

from __future__ import annotations

from typing import Any

from gateway.config.base import Strict, not_built


class ObservabilityConfig(Strict):
    otel: Any = not_built()
    # Ours: spans carry the turn's input and its answer's text (`gen_ai.prompt`,
    # `gen_ai.completion`). Off: no prompt or completion text is ever put in a span.
    trace_content: bool = False
