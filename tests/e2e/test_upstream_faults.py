"""A turn the upstream received and then lost before reporting usage (issue 42): a stream
cut mid-way (`break-stream`) or silent past `llama_stack.timeout` (`stall-stream`) ends
with `response.failed`, a JSON turn that got no answer in time (`hang-upstream`) with
LCORE's 503, and each is charged its reservation, not nothing; a turn the upstream
refused before any output (`fail-upstream`) still costs nothing."""

from __future__ import annotations

import json
import math

import pytest

INITIAL = 10 ** 6
OUTPUT = 99


@pytest.fixture(scope="module")
def faults(gateway_factory, upstream, tmp_path_factory):
    quotas = str(tmp_path_factory.mktemp("faults") / "quotas.db")
    return gateway_factory(upstream.url, llama_stack={"timeout": 1},
                           quota_handlers={"sqlite": {"db_path": quotas}, "output_reservation": OUTPUT,
                                           "limiters": [{"name": "daily", "type": "user_limiter",
                                                         "initial_quota": INITIAL, "quota_increase": 0,
                                                         "period": "1 day"}]})


def reservation(text: str) -> int:
    return math.ceil(len(json.dumps(text)) / 4) + OUTPUT


@pytest.mark.parametrize(("user", "text", "message"), [
    ("cut", "please break-stream", "ended without a terminal event"),
    ("stalled", "please stall-stream", "idle timeout"),
])
def test_a_stream_lost_after_it_started_is_charged_its_reservation(faults, user, text, message):
    status, frames = faults.stream({"input": text, "max_output_tokens": OUTPUT, "tool_choice": "none"},
                                   path=f"/v1/responses?user_id={user}", timeout=60)
    assert status == 200
    failed = [data for event, data in frames if event == "response.failed"]
    assert failed and message in failed[0]["response"]["error"]["message"], frames[-3:]
    assert failed[0]["response"]["available_quotas"] == {"daily": INITIAL - reservation(text)}
    assert faults.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"] == {"daily": INITIAL - reservation(text)}


def test_a_turn_refused_before_any_output_costs_nothing(faults):
    status, frames = faults.stream({"input": "fail-upstream", "max_output_tokens": OUTPUT, "tool_choice": "none"},
                                   path="/v1/responses?user_id=refused")
    assert frames[-2][0] == "response.failed"
    assert faults.get("/v1/quotas?user_id=refused").ok()["available_quotas"] == {"daily": INITIAL}


def test_a_json_turn_the_upstream_received_and_never_answered_is_charged_its_reservation(faults):
    text = "please hang-upstream"
    reply = faults.post("/v1/responses?user_id=hung", {"input": text, "max_output_tokens": OUTPUT,
                                                       "tool_choice": "none"}, timeout=60)
    assert reply.status == 503, reply.body
    assert reply.json()["detail"]["cause"] == "Request timed out."
    quotas = faults.get("/v1/quotas?user_id=hung").ok()["available_quotas"]
    assert quotas == {"daily": INITIAL - reservation(text)}
