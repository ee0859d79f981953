"""Tracing is asked for as in LCORE: `OTEL_SDK_DISABLED=false` and an OTLP endpoint
(either variable); anything else leaves it off, so no OpenTelemetry module is loaded."""

from __future__ import annotations

import pytest

from gateway.observability.otel_env import tracing_requested

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}


@pytest.mark.parametrize("environ, on", [
    ({"OTEL_SDK_DISABLED": "false", **ENDPOINT}, True),
    ({"OTEL_SDK_DISABLED": "False", **ENDPOINT}, True),
    ({"OTEL_SDK_DISABLED": " False ", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
    (ENDPOINT, False),                                          # LCORE: off unless OTEL_SDK_DISABLED=false
    ({"OTEL_SDK_DISABLED": "true", **ENDPOINT}, False),
    ({"OTEL_SDK_DISABLED": "0", **ENDPOINT}, False),            # only the word false turns it on
    ({"OTEL_SDK_DISABLED": "false"}, False),                    # nowhere to send spans
    ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": ""}, False),
    ({}, False),
])
def test_tracing_needs_the_sdk_enabled_and_an_endpoint(environ, on):
    assert tracing_requested(environ) is on
