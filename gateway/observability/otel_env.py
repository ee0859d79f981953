"""What the standard `OTEL_*` variables say, read without importing OpenTelemetry: with
tracing off the SDK and its exporter are never imported (tests/test_startup_imports.py).

Tracing is on, as in LCORE, when `OTEL_SDK_DISABLED=false` and an OTLP endpoint is set
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); everything else
(service name, resource attributes, headers, batch delays, sampler, propagators) is read
by the SDK itself from the same variables. User ids are anonymised with a keyed
HMAC-SHA-256 whose key is `OTEL_ANONYMIZATION_SECRET` (`user_ids.UserHasher`), in spans,
access lines and audit lines alike.
"""

from __future__ import annotations

from typing import Mapping

# The hasher lives with the rule every log line that names a user follows (`user_ids.py`).
from gateway.user_ids import ANONYMIZATION_SECRET, UserHasher

__all__ = ["ANONYMIZATION_SECRET", "UserHasher", "tracing_requested"]


def tracing_requested(environ: Mapping[str, str]) -> bool:
    return environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "false" and bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
