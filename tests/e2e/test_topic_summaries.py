"""Topic summaries through `gateway serve`, in forward mode (an upstream /v1/responses
call, `store: false`) and over the local engine (a chat completion): stored with a new
conversation's record (JSON and streamed turns), none for a continued conversation or
`generate_topic_summary: false`, never charged (the quota balance moves by the turn's
own usage only), and a summary call that fails loses nothing."""

from __future__ import annotations

import time

import pytest

from gateway.config.customization import DEFAULT_TOPIC_SUMMARY_PROMPT
from tests.support.flows import checked
from tests.support.gateway_db import GatewayDb

CHAT = "/v1/chat/completions"
MODES = ["forward", "engine"]
DAILY = {"name": "daily", "type": "user_limiter", "initial_quota": 100000, "quota_increase": 0, "period": "1 day"}
QUESTION = "How do pods scale in Kubernetes clusters"


def _launch(gateway_factory, upstream, chat_upstream, tmp_path, mode: str, **customization):
    target = upstream if mode == "forward" else chat_upstream
    llama_stack = {"url": target.url, "max_retries": 0} | ({"api": "chat_completions"} if mode == "engine" else {})
    storage = {"sqlite": {"db_path": str(tmp_path / f"gateway-{time.monotonic_ns()}.db")}}
    gateway = gateway_factory(target.url, llama_stack=llama_stack, database=storage,
                              quota_handlers={**storage, "limiters": [DAILY]},
                              customization={"topic_summaries": True, **customization})
    return gateway, target


def summary_calls(target, mode: str) -> list[dict]:
    """The summary calls the upstream received (what the gateway sent)."""
    if mode == "forward":
        return [r["body"] for r in target.requests("/v1/responses")
                if r["method"] == "POST" and r["body"].get("store") is False]
    return [r["body"] for r in target.requests(CHAT) if r["body"].get("stream") is False]


def balance(gateway, user: str) -> int:
    return gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def spent(response: dict) -> int:
    return response["usage"]["input_tokens"] + response["usage"]["output_tokens"]


@pytest.fixture(scope="module", params=MODES)
def summarizing(request, gateway_factory, upstream, chat_upstream, tmp_path_factory):
    mode = request.param
    gateway, target = _launch(gateway_factory, upstream, chat_upstream, tmp_path_factory.mktemp("summaries"), mode)
    return gateway, target, mode


def test_a_new_conversation_gets_a_summary_never_charged(summarizing):
    gateway, target, mode = summarizing
    target.clear()
    reply = gateway.post("/v1/responses?user_id=ann", {"input": QUESTION}).ok()
    [call] = summary_calls(target, mode)
    if mode == "forward":
        [turn] = [r["body"] for r in target.requests("/v1/responses")
                  if r["method"] == "POST" and r["body"].get("store") is not False]
        # The turn's model, and nothing but LCORE's fields.
        assert call == {"model": turn["model"], "input": QUESTION,
                        "instructions": DEFAULT_TOPIC_SUMMARY_PROMPT, "stream": False, "store": False}
    else:
        assert call["messages"] == [{"role": "system", "content": DEFAULT_TOPIC_SUMMARY_PROMPT},
                                    {"role": "user", "content": QUESTION}]
        assert "tools" not in call
    db = GatewayDb.of(gateway)
    conversation = db.conversation(reply["conversation"])
    # The scripted model's answer to the summary call (its instructions are a system message).
    assert conversation["topic_summary"] == f"Scripted reply (turn 1, 1 messages): {QUESTION}"
    # Charged the turn's own usage, nothing for the summary: in the answer and in the ledger.
    assert reply["available_quotas"] == {"daily": DAILY["initial_quota"] - spent(reply)}
    assert balance(gateway, "ann") == DAILY["initial_quota"] - spent(reply)

    # Continued: no summary call, and the conversation keeps its summary.
    target.clear()
    second = gateway.post("/v1/responses?user_id=ann", {"input": "And how do nodes scale?",
                                                        "conversation": reply["conversation"]}).ok()
    assert summary_calls(target, mode) == []
    assert db.conversation(reply["conversation"])["topic_summary"] == conversation["topic_summary"]
    assert balance(gateway, "ann") == DAILY["initial_quota"] - spent(reply) - spent(second)


def test_a_streamed_new_conversation_gets_one_too(summarizing):
    gateway, target, mode = summarizing
    target.clear()
    status, frames = gateway.stream({"input": "Streaming about OpenShift routes"}, path="/v1/responses?user_id=bea")
    assert status == 200
    terminal = checked(frames)[-1]
    assert terminal["type"] == "response.completed"
    assert len(summary_calls(target, mode)) == 1
    conversation = GatewayDb.of(gateway).conversation(terminal["response"]["conversation"])
    assert conversation["topic_summary"] == "Scripted reply (turn 1, 1 messages): Streaming about OpenShift routes"
    assert terminal["response"]["available_quotas"] == {"daily": DAILY["initial_quota"] - spent(terminal["response"])}


def test_none_when_the_request_says_so(summarizing):
    gateway, target, mode = summarizing
    target.clear()
    reply = gateway.post("/v1/responses?user_id=cid", {"input": QUESTION, "generate_topic_summary": False}).ok()
    assert summary_calls(target, mode) == []
    assert GatewayDb.of(gateway).conversation(reply["conversation"])["topic_summary"] == ""


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_summary_call_loses_nothing(gateway_factory, upstream, chat_upstream, tmp_path, mode):
    # The scripted upstream fails a call whose system prompt holds a trigger word
    # (gateway/devserver/triggers.py): here only the summary calls have it.
    gateway, target = _launch(gateway_factory, upstream, chat_upstream, tmp_path, mode,
                              topic_summary_prompt="Title this conversation. fail-upstream")
    target.clear()
    reply = gateway.post("/v1/responses?user_id=dan", {"input": QUESTION}).ok()
    assert reply["status"] == "completed" and reply["output_text"].endswith(QUESTION)
    [call] = summary_calls(target, mode)      # it was made, and failed
    db = GatewayDb.of(gateway)
    conversation = db.conversation(reply["conversation"])
    assert conversation["topic_summary"] == "" and conversation["message_count"] == 1
    assert db.turn(reply["id"]) is not None
    assert "recorded without one" in gateway.log()
    assert balance(gateway, "dan") == DAILY["initial_quota"] - spent(reply)
    # The conversation goes on as any other.
    second = gateway.post("/v1/responses?user_id=dan", {"input": "more", "conversation": reply["conversation"]}).ok()
    assert second["output_text"].startswith("Scripted reply (turn 2")
