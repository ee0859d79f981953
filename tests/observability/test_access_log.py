"""The access line's two formats (the keyed hash of user ids: tests/test_user_ids.py;
when the OTEL_* variables turn tracing on: test_otel_env.py)."""

from __future__ import annotations

import io
import json
import logging
import re
from types import SimpleNamespace

import pytest

from gateway.observability.access_log import AccessLog
from gateway.observability.requests import RequestRecord


def record(**fields) -> RequestRecord:
    kept = RequestRecord()
    for name, value in fields.items():
        setattr(kept, name, value)
    return kept


REQUEST = SimpleNamespace(method="POST", get={"request_id": "rid-1"}.get)
TURN = {"model": "m1", "input_tokens": 12, "output_tokens": 34, "upstream": 0.0081, "first_event": 0.0032,
        "streamed": True}


@pytest.fixture(autouse=True)
def info_level():
    """`gateway serve` logs at INFO (GATEWAY_LOG_LEVEL's default); pytest's root is at WARNING."""
    logger = logging.getLogger("gateway.access")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(level)


def written(access_format: str, kept: RequestRecord, status: int = 200, user: str | None = "ab" * 32,
            color: bool = False) -> str:
    stream = io.StringIO()
    AccessLog(access_format, color, stream).write(kept, REQUEST, "/v1/responses", status, 0.0123, user)
    [line] = stream.getvalue().splitlines()
    return line


def test_json_line_carries_every_field():
    line = json.loads(written("json", record(**TURN)))
    assert line["time"].endswith("Z") and len(line["time"]) == len("2026-11-26T07:00:00.000Z")
    assert {key: value for key, value in line.items() if key != "time"} == {
        "type": "access", "request_id": "rid-1", "user": "ab" * 32, "method": "POST", "route": "/v1/responses",
        "status": 200, "duration_ms": 12.3, "model": "m1", "input_tokens": 12, "output_tokens": 34,
        "upstream_ms": 8.1, "first_event_ms": 3.2}


def test_json_line_of_a_request_without_a_turn():
    line = json.loads(written("json", record(), status=404, user=None))
    assert line["status"] == 404 and line["user"] is None and line["model"] is None
    assert line["first_event_ms"] is None and line["upstream_ms"] is None


def test_json_line_of_a_json_turn_has_no_first_event():
    line = json.loads(written("json", record(**{**TURN, "streamed": False})))
    assert line["first_event_ms"] is None and line["output_tokens"] == 34


def test_text_line_is_readable():
    line = written("text", record(**TURN))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO gateway.access: .*", line)
    assert line.split(": ", 1)[1] == ("POST /v1/responses 200 12.3ms request_id=rid-1 user=abababababababab model=m1 tokens=12/34 "
                    "upstream=8.1ms first_event=3.2ms")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_text_line_is_colored_only_on_a_terminal():
    def line(stream: io.StringIO, color: bool) -> str:
        AccessLog("text", color, stream).write(record(), REQUEST, "/", 404, 0.001, None)
        return stream.getvalue()

    assert "\x1b[33m404\x1b[0m" in line(Terminal(), True)
    assert "\x1b[" not in line(Terminal(), False) and "\x1b[" not in line(io.StringIO(), True)


def test_no_line_below_the_level():
    stream = io.StringIO()
    logging.getLogger("gateway.access").setLevel(logging.WARNING)   # GATEWAY_LOG_LEVEL=WARNING
    AccessLog("text", False, stream).write(record(), REQUEST, "/", 200, 0.001, None)
    assert stream.getvalue() == ""


def test_a_workers_line_says_which_worker_answered(monkeypatch):
    """With `service.workers` > 1 (GATEWAY_WORKER_ID set by the supervisor): the index
    and pid in JSON, `worker=N` in text; nothing of it in a process alone (above)."""
    import os

    monkeypatch.setenv("GATEWAY_WORKER_ID", "1")
    line = json.loads(written("json", record(**TURN)))
    assert (line["worker"], line["pid"], line["first_event_ms"]) == (1, os.getpid(), 3.2)
    assert written("text", record(**TURN)).endswith("first_event=3.2ms worker=1")
