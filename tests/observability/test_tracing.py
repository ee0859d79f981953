"""The request span's attributes: no prompt or completion text unless
`observability.trace_content` is true; the user only as its hash."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from multidict import CIMultiDict
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.observability.requests import RequestRecord
from gateway.observability.tracing import RequestTracing

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def span_of(trace_content: bool):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = RequestTracing(SimpleNamespace(tracer=provider.get_tracer("test"), trace_content=trace_content))
    request = SimpleNamespace(method="POST", headers=CIMultiDict(traceparent=PARENT),
                              get={"request_id": "rid-7"}.get)
    record = RequestRecord()
    tracing.begin(request, record, "/v1/responses")
    record.model, record.input_tokens, record.output_tokens = "m1", 5, 6
    record.prompt, record.completion = [{"role": "user", "content": "my secret question"}], "the answer"
    tracing.end(record, request, 200, "c0ffee")
    [span] = exporter.get_finished_spans()
    return span


@pytest.mark.parametrize("trace_content", [False, True])
def test_request_span(trace_content):
    span = span_of(trace_content)
    assert span.name == "POST /v1/responses" and span.parent.span_id == 0xb7ad6b7169203331
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    attributes = dict(span.attributes)
    assert attributes["enduser.pseudo.id"] == "c0ffee" and attributes["gateway.request_id"] == "rid-7"
    assert attributes["gen_ai.usage.input_tokens"] == 5 and attributes["http.response.status_code"] == 200
    text = repr(attributes)
    assert ("my secret question" in text and "the answer" in text) is trace_content
    assert ("my secret question" not in text and "the answer" not in text) is not trace_content
