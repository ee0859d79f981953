"""Malformed SSE from the upstream (issue 42), in forward mode (a Responses stream) and
engine mode (a Chat Completions stream), through `gateway serve`: lines that are no SSE
field are skipped and a last frame without its blank line still counts (the stream
completes, charged its usage); a `data:` line that is not JSON fails the turn: a 502
before anything was sent, `response.failed` after; a body cut in the middle of an event
ends with `response.failed`. Each failure is charged the reservation (the upstream had
the turn and reported no usage), and leaves its conversation without a half-written turn.
The triggers: gateway/devserver/triggers.py (`malform`)."""

from __future__ import annotations

import json
import math

import pytest

from tests.support.engine_gateway import engine_config

INITIAL = 10 ** 6
OUTPUT = 99
LIMITER = {"name": "daily", "type": "user_limiter", "initial_quota": INITIAL, "quota_increase": 0, "period": "1 day"}


@pytest.fixture(scope="module", params=["forward", "engine"])
def malformed(request, gateway_factory, upstream, chat_upstream, tmp_path_factory):
    quotas = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("malformed") / "quotas.db")},
              "output_reservation": OUTPUT, "limiters": [LIMITER]}
    if request.param == "forward":
        gateway = gateway_factory(upstream.url, llama_stack={"timeout": 1}, quota_handlers=quotas)
    else:
        config = engine_config(chat_upstream.url)
        config["llama_stack"]["timeout"] = 1
        gateway = gateway_factory(chat_upstream.url, quota_handlers=quotas, **config)
    gateway.mode = request.param
    return gateway


def reservation(text: str) -> int:
    return math.ceil(len(json.dumps(text)) / 4) + OUTPUT


def balance(gateway, user: str) -> int:
    return gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def body(text: str, **extra):
    return {"input": text, "max_output_tokens": OUTPUT, "tool_choice": "none", **extra}


def assert_no_half_written_turn(gateway, user: str, conversation: str) -> None:
    """The next turn of the conversation is its first: the failed one left nothing."""
    after = gateway.post(f"/v1/responses?user_id={user}", body("and now?", conversation=conversation)).ok()
    if gateway.mode == "engine":  # forward mode: the upstream keeps its own conversation
        assert "(turn 1, 1 messages)" in after["output"][0]["content"][0]["text"], after["output"]


@pytest.mark.parametrize("trigger", ["garbage-frame", "unterminated-frame"])
def test_frames_the_gateway_can_read_complete_the_turn(malformed, trigger):
    user = f"readable-{trigger}"
    status, frames = malformed.stream(body(f"please {trigger}"), path=f"/v1/responses?user_id={user}")
    assert status == 200 and frames[-1] == (None, "[DONE]")
    completed = frames[-2][1]
    assert completed["type"] == "response.completed", frames[-3:]
    assert completed["response"]["output_text"].endswith(f"please {trigger}")
    usage = completed["response"]["usage"]
    assert balance(malformed, user) == INITIAL - usage["input_tokens"] - usage["output_tokens"]


@pytest.mark.parametrize(("trigger", "message"), [
    ("not-json-frame", "The upstream sent an event that is not JSON."),
    ("cut-frame", "The upstream stream ended without a terminal event."),
])
def test_a_stream_that_breaks_after_it_started_fails_charged_its_reservation(malformed, trigger, message):
    user, text = f"broken-{trigger}", f"please {trigger}"
    status, frames = malformed.stream(body(text), path=f"/v1/responses?user_id={user}")
    assert status == 200 and frames[-1] == (None, "[DONE]")
    failed = frames[-2][1]
    assert failed["type"] == "response.failed", frames[-3:]
    assert failed["response"]["error"] == {"code": "server_error", "message": message}
    assert failed["response"]["available_quotas"] == {"daily": INITIAL - reservation(text)}
    assert balance(malformed, user) == INITIAL - reservation(text)
    assert_no_half_written_turn(malformed, user, failed["response"]["conversation"])


def test_a_stream_that_opens_with_a_frame_that_is_not_json_is_a_502_charged_its_reservation(malformed):
    user, text = "opens-broken", "please not-json-first"
    reply = malformed.post(f"/v1/responses?user_id={user}", body(text, stream=True))
    assert reply.status == 502 and reply.headers["content-type"].startswith("application/json"), reply.body
    assert reply.json()["detail"] == {"response": "Invalid upstream response",
                                      "cause": "The upstream sent an event that is not JSON."}
    assert reply.json()["error"]["code"] == "upstream_bad_response"
    assert balance(malformed, user) == INITIAL - reservation(text)


def test_a_json_turn_over_a_broken_chat_stream_is_charged_its_reservation(malformed):
    """Engine mode only: a JSON turn still streams its Chat Completions (forward mode's
    JSON turn gets a JSON body, no frames)."""
    if malformed.mode != "engine":
        pytest.skip("a forward JSON turn reads no SSE")
    for trigger, status in (("not-json-first", 502), ("not-json-frame", 200), ("cut-frame", 200)):
        user, text = f"json-{trigger}", f"please {trigger}"
        reply = malformed.post(f"/v1/responses?user_id={user}", body(text))
        assert reply.status == status, reply.body
        if status == 200:
            assert reply.json()["status"] == "failed"
        assert balance(malformed, user) == INITIAL - reservation(text), trigger
