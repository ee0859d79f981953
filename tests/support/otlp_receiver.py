"""An OTLP/HTTP trace receiver for the tests: an aiohttp server that decodes what
OpenTelemetry's exporter POSTs to /v1/traces (protobuf, `opentelemetry-proto`) and
serves the spans it received as JSON at GET /_spans (DELETE clears them).

    python -m tests.support.otlp_receiver --port PORT
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                     ExportTraceServiceResponse)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.support.processes import Proc, free_port, python_module, spawn, wait_http

SPANS = web.AppKey("spans", list)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def decode(body: bytes) -> list[dict[str, Any]]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "service": resource.get("service.name"), "scope": scope_spans.scope.name, "name": span.name,
                    "kind": span.kind, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "attributes": {item.key: _value(item.value) for item in span.attributes},
                    "events": [event.name for event in span.events],
                    "links": [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()} for link in span.links],
                    "status": span.status.code, "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
                })
    return spans


async def receive(request: web.Request) -> web.Response:
    body = await request.read()
    if request.headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    request.app[SPANS].extend(decode(body))
    return web.Response(body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf")


async def spans(request: web.Request) -> web.Response:
    return web.json_response(request.app[SPANS])


async def clear(request: web.Request) -> web.Response:
    request.app[SPANS].clear()
    return web.json_response({})


def create_app() -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SPANS] = []
    app.router.add_post("/v1/traces", receive)
    app.router.add_get("/_spans", spans)
    app.router.add_delete("/_spans", clear)
    return app


def start_receiver(log_dir: Path) -> tuple[Proc, str]:
    """The receiver as a process of its own; returns it and its base URL."""
    port = free_port()
    proc = spawn(f"otlp-{port}", python_module("tests.support.otlp_receiver", "--port", str(port)), log_dir)
    url = f"http://127.0.0.1:{port}"
    wait_http(proc, f"{url}/_spans")
    return proc, url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    web.run_app(create_app(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
