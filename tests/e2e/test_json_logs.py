"""`service.access_log_format: json` through `gateway serve`: every line the gateway
writes is one JSON object (issue 41), the start-up lines, the upstream probe, the
`security:` warnings and the access lines alike, each with a level, a logger and a
message (access lines: `type: access`)."""

from __future__ import annotations

import json


def test_every_line_is_one_json_object(gateway_factory, upstream):
    # noop authentication: a start-up `security:` warning; the upstream probe logs at start.
    gateway = gateway_factory(upstream.url, service={"access_log": True, "access_log_format": "json"})
    assert gateway.post("/v1/responses", {"input": "hi"}).status == 200
    assert gateway.post("/v1/responses", "not json").status == 422
    lines = [line for line in gateway.log().splitlines() if line.strip()]
    records = []
    for line in lines:
        record = json.loads(line)   # raises on any line that is not JSON
        assert isinstance(record, dict), line
        records.append(record)
    logs = [record for record in records if record.get("type") == "log"]
    assert all({"time", "level", "logger", "message"} <= set(record) for record in logs)
    assert any(record["level"] == "WARNING" and record["message"].startswith("security: authentication.module: noop")
               for record in logs), logs
    assert any(record["logger"] == "gateway.upstream" and record["level"] == "INFO" for record in logs)   # the probe
    assert any(record.get("type") == "access" and record["route"] == "/v1/responses" for record in records)
    assert {record.get("type") for record in records} <= {"log", "access"}
