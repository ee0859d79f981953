"""`llama_stack.turn_deadline_seconds` (issue 42), through `gateway serve`: a stream still
running at its turn's deadline ends with `response.failed` (charged its reservation: the
upstream received it and reported no usage), a JSON turn gets LCORE's 503 `Request timed
out.`, each within a second or two of the deadline; a turn that ends in time is untouched."""

from __future__ import annotations

import json
import math
import time

import pytest

INITIAL = 10 ** 6
OUTPUT = 99
ENDLESS = {"scripted_delay_ms": "300", "scripted_deltas": "100"}


@pytest.fixture(scope="module")
def bounded(gateway_factory, upstream, tmp_path_factory):
    quotas = str(tmp_path_factory.mktemp("deadline") / "quotas.db")
    return gateway_factory(upstream.url, llama_stack={"turn_deadline_seconds": 2},
                           quota_handlers={"sqlite": {"db_path": quotas}, "output_reservation": OUTPUT,
                                           "limiters": [{"name": "daily", "type": "user_limiter",
                                                         "initial_quota": INITIAL, "quota_increase": 0,
                                                         "period": "1 day"}]})


def test_a_stream_past_its_deadline_ends_failed_and_is_charged(bounded):
    body = {"input": "hello", "max_output_tokens": OUTPUT, "tool_choice": "none", "metadata": ENDLESS}
    started = time.monotonic()
    status, frames = bounded.stream(body, path="/v1/responses?user_id=slow")
    took = time.monotonic() - started
    assert status == 200
    assert frames[-2][0] == "response.failed", frames[-3:]
    assert "deadline" in frames[-2][1]["response"]["error"]["message"]
    assert 2 <= took < 6, took
    reservation = math.ceil(len(json.dumps(body["input"])) / 4) + OUTPUT
    assert bounded.get("/v1/quotas?user_id=slow").ok()["available_quotas"] == {"daily": INITIAL - reservation}


def test_a_json_turn_past_its_deadline_is_lcores_timeout(bounded):
    started = time.monotonic()
    reply = bounded.post("/v1/responses?user_id=late", {"input": "hello", "tool_choice": "none",
                                                        "metadata": {"scripted_delay_ms": "8000"}})
    assert reply.status == 503, reply.body
    assert reply.json()["detail"] == {"response": "Unable to connect to Llama Stack", "cause": "Request timed out."}
    assert time.monotonic() - started < 6


def test_a_turn_within_its_deadline_completes(bounded):
    status, frames = bounded.stream({"input": "hello", "tool_choice": "none",
                                     "metadata": {"scripted_delay_ms": "50", "scripted_deltas": "5"}})
    assert status == 200 and frames[-2][0] == "response.completed"
    assert bounded.post("/v1/responses", {"input": "hello", "tool_choice": "none"}).status == 200
