"""Guardrails in the local engine through `gateway serve` (llama_stack.api:
chat_completions), checked by the scripted upstream's `/v1/moderations`
(gateway/devserver/moderations.py: `scripted-guard` flags any text with `flag-me`,
`scripted-output-guard` only the model's answers), and `guardrails` passed through in
forward mode."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.flows import checked, kinds
from tests.support.openai_shapes import replay_through_sdk, validate_response

CHAT = "/v1/chat/completions"
MODERATIONS = "/v1/moderations"
FLAGGED = "Content blocked by safety guardrails (flagged for: violence)"
MODERATION_KEY = "moderation-s3cret-key"
# Paced, so each sentence of the answer arrives in a read of its own.
PACED = {"scripted_delay_ms": "20"}
LATE = "Tell me more. Then flag-me please."


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    """Guardrails checked by the upstream's own /v1/moderations (the default)."""
    return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url))


def stream(gateway, body):
    status, frames = gateway.stream(body)
    assert status == 200, frames
    return checked(frames)  # numbered from 0, every event an `openai` type


def moderation_requests(chat_upstream):
    return [r["body"] for r in chat_upstream.requests(MODERATIONS)]


REFUSAL_EVENTS = ["output_item.added", "content_part.added", "refusal.delta", "refusal.done", "content_part.done",
                  "output_item.done"]


def test_flagged_input_is_refused_before_the_model_runs(engine, chat_upstream):
    chat_upstream.clear()
    events = stream(engine, {"input": "Please flag-me now", "guardrails": ["scripted-guard"]})
    assert kinds(events) == ["created", "in_progress", *REFUSAL_EVENTS, "completed"]
    [message] = events[-1]["response"]["output"]
    assert message["role"] == "assistant" and message["content"] == [{"type": "refusal", "refusal": FLAGGED}]
    assert events[4]["delta"] == FLAGGED and events[-1]["response"]["status"] == "completed"
    assert chat_upstream.requests(CHAT) == []  # the model never saw it
    assert moderation_requests(chat_upstream) == [{"input": "Please flag-me now", "model": "scripted-guard"}]
    assert replay_through_sdk(events).output[0].content[0].refusal == FLAGGED


def test_flagged_input_as_json_and_the_spec_form(engine, chat_upstream):
    body = engine.post("/v1/responses", {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "flag-me"}]}], "guardrails": [{"type": "scripted-guard"}]}).ok()
    validate_response(body)
    assert body["status"] == "completed" and body["output"][0]["content"][0]["refusal"] == FLAGGED


def test_clean_input_and_output_pass_every_check(engine, chat_upstream):
    chat_upstream.clear()
    events = stream(engine, {"input": "Hello there. How are you?", "guardrails": ["scripted-guard"],
                             "metadata": PACED})
    assert events[-1]["response"]["status"] == "completed"
    text = events[-1]["response"]["output"][0]["content"][0]["text"]
    assert text == "Scripted reply (turn 1, 1 messages): Hello there. How are you?"
    assert "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta") == text
    # The input once, then the answer at each sentence end and at its end, whole so far.
    assert moderation_requests(chat_upstream) == [
        {"input": "Hello there. How are you?", "model": "scripted-guard"},
        {"input": "Scripted reply (turn 1, 1 messages): Hello there. ", "model": "scripted-guard"},
        {"input": text, "model": "scripted-guard"}]


def test_a_late_violation_streams_only_what_passed_then_the_refusal(engine, chat_upstream):
    status, frames = engine.stream({"input": LATE, "guardrails": ["scripted-output-guard"], "metadata": PACED})
    assert status == 200
    events = checked(frames)
    assert "flag-me" not in json.dumps(events)  # nothing flagged reached the client
    deltas = kinds(events).count("output_text.delta")
    assert kinds(events) == ["created", "in_progress", "output_item.added", "content_part.added",
                             *["output_text.delta"] * deltas, "output_text.done", "content_part.done",
                             "output_item.done", *REFUSAL_EVENTS, "completed"]
    passed, refusal = events[-1]["response"]["output"]
    assert passed["content"][0]["text"] == "Scripted reply (turn 1, 1 messages): Tell me more. "
    assert refusal["content"] == [{"type": "refusal", "refusal": FLAGGED}]
    assert events[-1]["response"]["usage"]["output_tokens"] > 0  # the round's usage still counts
    final = replay_through_sdk(events)
    assert final.output_text == "Scripted reply (turn 1, 1 messages): Tell me more. "


def test_a_late_violation_as_json(engine):
    body = engine.post("/v1/responses", {"input": LATE, "guardrails": ["scripted-output-guard"],
                                         "metadata": PACED}).ok()
    validate_response(body)
    assert "flag-me" not in json.dumps(body)
    assert [part["type"] for item in body["output"] for part in item["content"]] == ["output_text", "refusal"]
    # The stored response is the same, and the next turn continues after the refusal.
    assert engine.get(f"/v1/responses/{body['id']}").ok()["output"] == body["output"]
    follow = engine.post("/v1/responses", {"input": "ok", "previous_response_id": body["id"]}).ok()
    assert follow["status"] == "completed"


def test_moderation_failing_mid_answer_fails_the_response_closed(engine):
    events = stream(engine, {"input": "Hello there. Then break-moderation now.", "guardrails": ["scripted-guard"],
                             "metadata": PACED})
    assert "break-moderation" not in json.dumps(events)  # the unchecked text was dropped
    assert kinds(events)[-4:] == ["output_text.done", "content_part.done", "output_item.done", "failed"]
    response = events[-1]["response"]
    assert response["output"][0]["content"][0]["text"] == "Scripted reply (turn 1, 1 messages): Hello there. "
    assert response["status"] == "failed"
    assert response["error"]["message"] == "The moderation service failed (HTTP 500)"


def test_an_answer_flagged_at_once_shows_no_text(engine):
    # Unpaced, the whole answer arrives in one read: it is checked whole, and refused whole.
    events = stream(engine, {"input": "flag-me", "guardrails": ["scripted-output-guard"]})
    assert kinds(events) == ["created", "in_progress", *REFUSAL_EVENTS, "completed"]


def test_bad_guardrails_are_422_before_anything_runs(engine, chat_upstream):
    chat_upstream.clear()
    reply = engine.post("/v1/responses", {"input": "hi", "guardrails": ["no-such-guard"]})
    assert reply.status == 422, reply.body
    assert reply.json()["error"]["param"] == "guardrails"
    assert "The model `no-such-guard` does not exist." in reply.json()["detail"]["cause"]
    reply = engine.post("/v1/responses", {"input": "hi", "guardrails": [{"type": "scripted-guard", "x": 1}]})
    assert reply.status == 422 and reply.json()["error"]["param"] == "guardrails"
    assert chat_upstream.requests(CHAT) == []


@pytest.fixture(scope="module")
def closed(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, **engine_config(
        chat_upstream.url, guardrails={"moderation_url": "http://127.0.0.1:9/v1/moderations", "timeout": 2}))


def test_unreachable_moderation_fails_closed(closed, chat_upstream):
    chat_upstream.clear()
    for stream_ in (False, True):
        reply = closed.post("/v1/responses", {"input": "hi", "guardrails": ["scripted-guard"], "stream": stream_})
        assert reply.status == 503, reply.body
        assert reply.json()["detail"] == {"response": "Unable to connect to the moderation service",
                                          "cause": "The moderation service could not be reached"}
    assert chat_upstream.requests(CHAT) == []
    # Without guardrails the moderation service is not needed.
    assert closed.post("/v1/responses", {"input": "hi"}).ok()["status"] == "completed"


@pytest.fixture(scope="module")
def open_(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, **engine_config(
        chat_upstream.url, guardrails={"moderation_url": "http://127.0.0.1:9/v1/moderations", "timeout": 2,
                                   "fail_open": True}))


def test_unreachable_moderation_fails_open_when_configured(open_):
    events = stream(open_, {"input": "Please flag-me now", "guardrails": ["scripted-guard"]})
    assert events[-1]["response"]["status"] == "completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"].endswith("Please flag-me now")
    assert "guardrails not checked (fail_open)" in open_.log()


@pytest.fixture(scope="module")
def windowed(gateway_factory, chat_upstream):
    """A configured moderation endpoint (here the upstream's, reached by URL) with its
    own key, checking every 30 characters."""
    return gateway_factory(chat_upstream.url, **engine_config(
        chat_upstream.url, guardrails={"moderation_url": f"{chat_upstream.url}/v1/moderations",
                                   "api_key": MODERATION_KEY, "output_window": 30}))


def test_a_configured_endpoint_its_key_and_a_window(windowed, chat_upstream):
    chat_upstream.clear()
    events = stream(windowed, {"input": "one two three four five six seven", "guardrails": ["scripted-guard"],
                               "metadata": PACED})
    text = events[-1]["response"]["output"][0]["content"][0]["text"]
    checks = chat_upstream.requests(MODERATIONS)
    assert all(r["headers"]["authorization"] == f"Bearer {MODERATION_KEY}" for r in checks)
    answers = [r["body"]["input"] for r in checks[1:]]  # after the input's check
    assert answers[-1] == text and len(answers) >= 2
    # Each check but the last (the end of the answer) came once 30 more characters had.
    assert all(len(later) - len(earlier) >= 30 for earlier, later in zip(["", *answers[:-2]], answers[:-1]))


def test_forward_mode_passes_guardrails_to_the_upstream(gateway, upstream):
    reply = gateway.post("/v1/responses", {"input": "hi", "guardrails": ["llama-guard", {"type": "other"}]})
    assert reply.status == 200, reply.body
    assert upstream.last()["body"]["guardrails"] == ["llama-guard", {"type": "other"}]
