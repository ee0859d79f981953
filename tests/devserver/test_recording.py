"""What the stand-in received, kept raw and decoded only when a test asks: headers with
lower-case names and repeats joined, JSON bodies parsed (anything else null), the oldest
dropped past the limit, and the --log file of one JSON line per request."""

from __future__ import annotations

import json

from gateway.devserver.recording import Recorder

HEADERS = ((b"Authorization", b"Bearer t"), (b"X-Tag", b"a"), (b"x-tag", b"b"))


def test_a_request_as_a_test_reads_it():
    recorder = Recorder()
    recorder.add("POST", "/v1/responses", "stream=true", HEADERS, b'{"input":"hi"}')
    [seen] = recorder.snapshot()
    assert (seen["method"], seen["path"], seen["query"]) == ("POST", "/v1/responses", "stream=true")
    assert seen["headers"] == {"authorization": "Bearer t", "x-tag": "a, b"}
    assert seen["body"] == {"input": "hi"} and isinstance(seen["ts"], float)


def test_bodies_that_are_not_json_are_null_and_the_oldest_go_first():
    recorder = Recorder(limit=2)
    for body in (b"", b"not json", b"[1]"):
        recorder.add("POST", "/x", "", (), body)
    assert [seen["body"] for seen in recorder.snapshot()] == [None, [1]]
    recorder.clear()
    assert recorder.snapshot() == []


def test_the_log_file_without_keeping_records(tmp_path):
    log = tmp_path / "requests.jsonl"
    recorder = Recorder(enabled=False, log_path=str(log))
    assert recorder.active
    recorder.add("GET", "/v1/models", "", HEADERS, b"")
    recorder.add("GET", "/health", "", (), b"")
    recorder.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["path"] for line in lines] == ["/v1/models", "/health"] and recorder.snapshot() == []
    assert not Recorder(enabled=False).active
