"""What the standard `OTEL_*` variables say, read without importing OpenTelemetry: with
tracing off the SDK and its exporter are never imported (tests/test_startup_imports.py).

Tracing is on, as in LCORE, when `OTEL_SDK_DISABLED=false` and an OTLP endpoint is set
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); everything else
(service name, resource attributes, headers, batch delays, sampler, propagators) is read
by the SDK itself from the same variables. User ids are anonymised with a keyed
HMAC-SHA-256 whose key is `OTEL_ANONYMIZATION_SECRET`, in spans and access lines alike.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Mapping

ANONYMIZATION_SECRET = "OTEL_ANONYMIZATION_SECRET"
# Distinct user ids remembered with their hash: one HMAC per new user, not per request.
_HASHES_KEPT = 4096


def tracing_requested(environ: Mapping[str, str]) -> bool:
    return environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "false" and bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


class UserHasher:
    """A user id → the hex HMAC-SHA-256 of it under the anonymisation key. Without
    `OTEL_ANONYMIZATION_SECRET` the key is random per process: ids still never appear,
    but the same user hashes differently on each replica and after a restart."""

    def __init__(self, environ: Mapping[str, str] | None = None):
        secret = (os.environ if environ is None else environ).get(ANONYMIZATION_SECRET)
        self.keyed = bool(secret)
        self._key = secret.encode() if secret else os.urandom(32)
        self._known: dict[str, str] = {}

    def __call__(self, user_id: str) -> str:
        known = self._known.get(user_id)
        if known is None:
            known = hmac.new(self._key, user_id.encode(), hashlib.sha256).hexdigest()
            if len(self._known) >= _HASHES_KEPT:
                self._known.clear()
            self._known[user_id] = known
        return known
