"""The JSON form of the gateway's log records (`service.access_log_format: json`)."""

from __future__ import annotations

import json
import logging

from gateway.observability.json_logs import JsonFormatter


def test_a_record_with_a_traceback_is_one_json_line():
    try:
        raise ValueError("broken\nacross lines")
    except ValueError:
        import sys
        record = logging.LogRecord("gateway.http", logging.ERROR, __file__, 1, "failed for %s", ("req-1",),
                                   sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["type"] == "log" and parsed["level"] == "ERROR" and parsed["logger"] == "gateway.http"
    assert parsed["message"] == "failed for req-1"
    assert parsed["exc_info"].startswith("Traceback") and "ValueError: broken\nacross lines" in parsed["exc_info"]
    assert parsed["time"].endswith("Z")


def test_a_workers_lines_carry_its_index_and_pid(monkeypatch):
    import os

    record = logging.LogRecord("gateway", logging.INFO, __file__, 1, "serving", None, None)
    assert "worker" not in json.loads(JsonFormatter().format(record))
    monkeypatch.setenv("GATEWAY_WORKER_ID", "0")
    line = json.loads(JsonFormatter().format(record))
    assert (line["worker"], line["pid"], line["message"]) == (0, os.getpid(), "serving")
