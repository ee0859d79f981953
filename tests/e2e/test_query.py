"""LCORE's `POST /v1/query` through `gateway serve` in front of the scripted upstream:
LCORE's `QueryResponse`, its request model's 422 bodies, attachments, the mapping onto
the Responses request the upstream receives, RBAC (`model_override` for any
provider/model, other users' conversations), quotas before any upstream call, and the
stops that are this endpoint's 413 / 500 with nothing recorded."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.support.gateway_db import Counts, GatewayDb

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lcore"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
KEYS = {"querier": ("querier-key-0001", ["querier"]), "boss": ("boss-key-0001", ["querier", "override"]),
        "support": ("support-key-0001", ["querier", "support"])}
ACCESS_RULES = [{"role": "querier", "actions": ["query", "streaming_query"]},
                {"role": "override", "actions": ["model_override"]},
                {"role": "support", "actions": ["query_other_conversations"]}]


def ask(gateway, body, user="ann", **kwargs):
    return gateway.post(f"/v1/query?user_id={user}", body, **kwargs)


def test_the_answer_has_exactly_lcores_fields(gateway, upstream):
    upstream.clear()
    body = ask(gateway, {"query": "hello there, say hi"}).ok()
    captured = json.loads((FIXTURES / "query.json").read_text())
    assert list(body) == list(captured)
    assert len(body["conversation_id"]) == 48 and not body["conversation_id"].startswith("conv_")
    assert body["response"] == "Scripted reply (turn 1, 1 messages): hello there, say hi"
    assert body["truncated"] is False and body["tool_calls"] == [] and body["tool_results"] == []
    assert body["input_tokens"] > 0 and body["output_tokens"] > 0 and body["available_quotas"] == {}
    sent = upstream.last()["body"]
    assert sent["input"] == "hello there, say hi" and sent["store"] is True
    assert not {"query", "generate_topic_summary", "media_type"} & set(sent)
    # Continued by its bare id, as LCORE clients do.
    again = ask(gateway, {"query": "and again", "conversation_id": body["conversation_id"]}).ok()
    assert again["conversation_id"] == body["conversation_id"]
    assert again["response"].startswith("Scripted reply (turn 2, 3 messages)")


def test_fields_map_onto_the_responses_request(gateway, upstream):
    upstream.clear()
    ask(gateway, {"query": "hi", "system_prompt": "You are terse.", "no_tools": True}).ok()
    sent = upstream.last()["body"]
    assert sent["instructions"] == "You are terse." and "tools" not in sent


def test_text_attachments_are_appended_and_images_are_data_urls(gateway, upstream):
    upstream.clear()
    attachments = [{"attachment_type": "log", "content_type": "text/plain", "content": "line 1"},
                   {"attachment_type": "configuration", "content_type": "application/yaml", "content": "a: 1"},
                   {"attachment_type": "api object", "content_type": "application/json", "content": '{"k": 1}'},
                   {"attachment_type": "event", "content_type": "application/xml", "content": "<e/>"}]
    ask(gateway, {"query": "what failed?", "attachments": attachments}).ok()
    assert upstream.last()["body"]["input"] == (
        "what failed?\n\n[Attachment: log]\nline 1\n\n[Attachment: configuration]\na: 1"
        '\n\n[Attachment: api object]\n{"k": 1}\n\n[Attachment: event]\n<e/>')
    image = {"attachment_type": "image", "content_type": "image/png", "content": PNG}
    ask(gateway, {"query": "what is this?", "attachments": [image]}).ok()
    message, = upstream.last()["body"]["input"]
    assert message["content"][0] == {"type": "input_text", "text": "what is this?"}
    assert message["content"][1]["image_url"] == f"data:image/png;base64,{PNG}"


@pytest.mark.parametrize("attachment, cause", [
    ({"attachment_type": "memo", "content_type": "text/plain", "content": "x"},
     "Invalid attachment type memo: must be one of {'alert', 'api object', 'configuration', 'error message', "
     "'event', 'image', 'log', 'stack trace'}"),
    ({"attachment_type": "log", "content_type": "text/html", "content": "x"},
     "Invalid attachment content type text/html: must be one of {'text/plain', 'application/json', "
     "'application/yaml', 'application/xml', 'image/jpeg', 'image/png'}"),
])
def test_bad_attachments_are_lcores_422_and_nothing_is_sent(gateway, upstream, attachment, cause):
    upstream.clear()
    reply = ask(gateway, {"query": "look", "attachments": [attachment]})
    assert reply.status == 422, reply.body
    assert reply.json() == {"detail": {"response": "Invalid attribute value", "cause": cause}}
    assert upstream.requests() == []


# LCORE's e2e bodies (streaming_query.feature): its `Attachment` model refuses them, so
# each is FastAPI's list entry at the attachment, on both endpoints.
NOT_AN_IMAGE = base64.b64encode(b"this is not an image at all").decode()


@pytest.mark.parametrize("attachment, message", [
    ({"attachment_type": "configuration", "content_type": "image/png", "content": PNG},
     "attachment_type and content_type are inconsistent: attachment_type='configuration', content_type='image/png'"),
    ({"attachment_type": "image", "content_type": "text/plain", "content": "x"},
     "attachment_type and content_type are inconsistent: attachment_type='image', content_type='text/plain'"),
    ({"attachment_type": "image", "content_type": "image/png", "content": "not-valid-base64!!!"},
     "Invalid base64 content for image attachment: Only base64 data is allowed"),
    ({"attachment_type": "image", "content_type": "image/png", "content": "iVBORw0"},
     "Invalid base64 content for image attachment: Incorrect padding"),
    ({"attachment_type": "image", "content_type": "image/png", "content": NOT_AN_IMAGE},
     "Image content does not match declared content_type 'image/png': invalid image data"),
    ({"attachment_type": "image", "content_type": "image/jpeg", "content": PNG},
     "Image content does not match declared content_type 'image/jpeg': invalid image data"),
])
@pytest.mark.parametrize("path", ["/v1/query", "/v1/streaming_query"])
def test_bad_images_are_lcores_validation_list(gateway, upstream, path, attachment, message):
    upstream.clear()
    text = {"attachment_type": "log", "content_type": "text/plain", "content": "fine"}
    reply = gateway.post(f"{path}?user_id=ann", {"query": "look", "attachments": [text, attachment]})
    assert reply.status == 422, reply.body
    assert reply.json()["detail"] == [{"type": "value_error", "loc": ["body", "attachments", 1],
                                       "msg": f"Value error, {message}", "input": attachment,
                                       "ctx": {"error": {}}}]
    assert upstream.requests() == []


@pytest.mark.parametrize("body, detail", [
    ({}, [{"type": "missing", "loc": ["body", "query"], "msg": "Field required", "input": {}}]),
    ({"query": "q", "conversation_id": "123e4567"},
     [{"type": "value_error", "loc": ["body", "conversation_id"], "msg": "Value error, Improper conversation ID "
       "'123e4567'", "input": "123e4567", "ctx": {"error": {}}}]),
    ({"query": "q", "model": "scripted-chat"},
     [{"type": "value_error", "loc": ["body"], "msg": "Value error, Provider must be specified if model is "
       "specified", "input": {"query": "q", "model": "scripted-chat"}, "ctx": {"error": {}}}]),
    ({"query": "q", "provider": "scripted"},
     [{"type": "value_error", "loc": ["body"], "msg": "Value error, Model must be specified if provider is "
       "specified", "input": {"query": "q", "provider": "scripted"}, "ctx": {"error": {}}}]),
    ({"query": "q", "stream": True},
     [{"type": "extra_forbidden", "loc": ["body", "stream"], "msg": "Extra inputs are not permitted",
       "input": True}]),
])
def test_validation_is_fastapis_list_in_both_error_body_modes(gateway, gateway_factory, upstream, body, detail):
    lcore_only = _lcore_bodies(gateway_factory, upstream)
    for target in (gateway, lcore_only):
        upstream.clear()
        reply = ask(target, body)
        assert reply.status == 422 and reply.json() == {"detail": detail}   # LCORE's body: no OpenAI `error`
        assert upstream.requests() == []


_LCORE_ONLY = {}


def _lcore_bodies(gateway_factory, upstream):
    if "gateway" not in _LCORE_ONLY:
        _LCORE_ONLY["gateway"] = gateway_factory(upstream.url, service={"error_body": "lcore"})
    return _LCORE_ONLY["gateway"]


@pytest.mark.parametrize("body, status", [({}, 422), ({"query": "q", "conversation_id": "123e4567"}, 422),
                                          ({"query": "q", "model": "m"}, 422),
                                          ({"query": "q", "conversation_id": "0" * 48}, 404)])
def test_streaming_query_refuses_the_same_way_before_the_stream(gateway, upstream, body, status):
    upstream.clear()
    streamed = gateway.post("/v1/streaming_query?user_id=ann", body)
    assert streamed.status == status and streamed.json() == ask(gateway, body).json()
    assert upstream.requests("/v1/responses") == []


def test_an_unreachable_upstream_is_503(gateway_factory):
    down = gateway_factory("http://127.0.0.1:9")
    for path in ("/v1/query", "/v1/streaming_query"):
        reply = down.post(f"{path}?user_id=ann", {"query": "anyone?"})
        assert reply.status == 503 and reply.json() == {"detail": {"response": "Unable to connect to Llama Stack",
                                                                   "cause": "Connection error."}}


def test_a_bad_media_type_is_422(gateway):
    reply = ask(gateway, {"query": "q", "media_type": "text/html"})
    assert reply.status == 422 and reply.json()["detail"][0]["loc"] == ["body", "media_type"]


def test_unknown_conversation_and_models_are_lcores_404s(gateway, upstream):
    upstream.clear()
    missing = "0" * 48
    reply = ask(gateway, {"query": "q", "conversation_id": missing})
    assert reply.status == 404 and reply.json()["detail"] == {
        "response": "Conversation not found", "cause": f"Conversation with ID {missing} does not exist"}
    reply = ask(gateway, {"query": "q", "provider": "scripted", "model": "unknown"})
    assert reply.status == 404 and reply.json()["detail"] == {
        "response": "Model not found", "cause": "Model with ID unknown does not exist"}
    reply = ask(gateway, {"query": "q", "provider": "nowhere", "model": "scripted-chat"})
    assert reply.status == 404 and reply.json()["detail"]["cause"] == "Model with ID scripted-chat does not exist"
    assert upstream.requests("/v1/responses") == []


def test_upstream_failures_are_lcores_errors(gateway):
    reply = ask(gateway, {"query": "please context-overflow now"})
    assert reply.status == 413 and reply.json() == {"detail": {
        "response": "Prompt is too long",
        # The model as the upstream lists it (the scripted one names no provider).
        "cause": "The input exceeds the context window size of model 'scripted-chat'."}}, reply.body
    reply = ask(gateway, {"query": "please fail-upstream now"})
    assert reply.status == 500, reply.body


@pytest.fixture(scope="module")
def rbac(gateway_factory, upstream):
    return gateway_factory(upstream.url, authentication={"module": "api-key-token", "api_key_config": {"keys": [
        {"key": key, "user_id": user, "roles": roles} for user, (key, roles) in KEYS.items()]}},
        authorization={"access_rules": ACCESS_RULES})


def as_(user):
    return {"Authorization": f"Bearer {KEYS[user][0]}"}


def test_any_provider_and_model_needs_model_override_even_the_default(rbac, upstream):
    for path in ("/v1/query", "/v1/streaming_query", "/v1/streaming_query/interrupt"):
        reply = rbac.post(path, {"query": "q"})
        assert reply.status == 401 and reply.json() == {"detail": {
            "response": "Missing or invalid credentials provided by client", "cause": "No Authorization header found"}}
        reply = rbac.post(path, {"query": "q"}, headers={"Authorization": "Basic abc"})
        assert reply.status == 401 and reply.json()["detail"]["cause"] == "No token found in Authorization header"
    upstream.clear()
    default = {"query": "q", "provider": "scripted", "model": "scripted-chat"}
    for path in ("/v1/query", "/v1/streaming_query"):
        reply = rbac.post(path, default, headers=as_("querier"))
        assert reply.status == 403 and reply.json() == {"detail": {
            "response": "This instance does not permit overriding model/provider in the query request (missing "
                        "permission: model_override). Please remove the model and provider fields from your request.",
            "cause": "User lacks model_override permission required to override model/provider."}}, reply.body
    assert upstream.requests() == []
    # Past the permission check: the scripted upstream lists its model without a
    # provider, so `scripted/scripted-chat` is then LCORE's 404.
    reply = rbac.post("/v1/query", default, headers=as_("boss"))
    assert reply.status == 404 and reply.json()["detail"]["response"] == "Model not found"


def test_another_users_conversation_needs_query_other_conversations(rbac, tmp_path):
    mine = rbac.post("/v1/query", {"query": "mine"}, headers=as_("boss")).ok()["conversation_id"]
    reply = rbac.post("/v1/query", {"query": "theirs", "conversation_id": mine}, headers=as_("querier"))
    assert reply.status == 403 and reply.json()["detail"] == {
        "response": "User does not have permission to perform this action",
        "cause": f"User querier does not have permission to read conversation with ID {mine}"}
    streamed = rbac.post("/v1/streaming_query", {"query": "theirs", "conversation_id": mine}, headers=as_("querier"))
    assert streamed.status == 403 and streamed.json() == reply.json()
    helped = rbac.post("/v1/query", {"query": "help", "conversation_id": mine}, headers=as_("support")).ok()
    assert helped["conversation_id"] == mine


def test_quota_is_checked_before_any_upstream_call(gateway_factory, upstream, tmp_path):
    limited = gateway_factory(upstream.url, quota_handlers={
        "sqlite": {"db_path": str(tmp_path / "quota.db")},
        "limiters": [{"name": "daily", "type": "user_limiter", "initial_quota": 1, "quota_increase": 0,
                      "period": "1 day"}]})
    upstream.clear()
    for path in ("/v1/query", "/v1/streaming_query"):
        reply = limited.post(f"{path}?user_id=poor", {"query": "hello again"})
        assert reply.status == 429, reply.body
        detail = reply.json()["detail"]
        assert detail["response"] == "The quota has been exceeded"
        assert detail["cause"].startswith("User poor has 1 tokens, but ") and detail["cause"].endswith(
            " tokens are needed"), detail
    assert upstream.requests() == []


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_a_length_stop_is_413_charged_and_not_recorded(mode, gateway_factory, upstream, chat_upstream, tmp_path):
    db_path = tmp_path / "gateway.db"
    keys = {"database": {"sqlite": {"db_path": str(db_path)}}, "quota_handlers": {
        "sqlite": {"db_path": str(db_path)},
        "limiters": [{"name": "daily", "type": "user_limiter", "initial_quota": 100000,
                      "quota_increase": 0, "period": "1 day"}]}}
    if mode == "engine":
        engine = gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url,
                                                                 "api": "chat_completions"}, **keys)
    else:
        engine = gateway_factory(upstream.url, **keys)
    reply = engine.post("/v1/query?user_id=len", {"query": "go on finish-length"})
    assert reply.status == 413 and reply.json()["detail"]["response"] == "Prompt is too long"
    reply = engine.post("/v1/query?user_id=len", {"query": "go on content-filter"})
    assert reply.status == 500 and reply.json()["detail"] == {
        "response": "Error while processing query",
        "cause": "The model refused to generate a response due to content policy."}
    db = GatewayDb.of(engine)
    db.flush()
    assert db.counts(user_id="len") == Counts(conversations=0, turns=0)
    # Charged what the upstream reported (LCORE charges nothing for these).
    assert engine.get("/v1/quotas?user_id=len").ok()["available_quotas"]["daily"] < 100000


def test_lcores_error_bodies_whatever_error_body_says(gateway, gateway_factory, upstream):
    """These are not OpenAI endpoints: a refusal is LCORE's `{"detail": ...}` in both
    `service.error_body` modes (validation: test_validation_is_fastapis_list_...)."""
    lcore_only = _lcore_bodies(gateway_factory, upstream)
    missing = "0" * 48
    unknown = "00000000-0000-4000-8000-000000000000"
    for target in (gateway, lcore_only):
        for path in ("/v1/query", "/v1/streaming_query"):
            reply = target.post(f"{path}?user_id=ann", {"query": "q", "conversation_id": missing})
            assert reply.status == 404 and reply.json() == {"detail": {
                "response": "Conversation not found", "cause": f"Conversation with ID {missing} does not exist"}}
        reply = target.post("/v1/streaming_query/interrupt?user_id=ann", {"request_id": unknown})
        assert reply.status == 404 and reply.json() == {"detail": {
            "response": "Streaming Request not found", "cause": f"Streaming Request with ID {unknown} does not exist"}}


def test_shield_ids_naming_an_unknown_shield_is_404_and_nothing_is_sent(gateway, upstream):
    """No shields are configured in this gateway (docs/shields.md)."""
    upstream.clear()
    for path in ("/v1/query", "/v1/streaming_query"):
        reply = gateway.post(f"{path}?user_id=ann", {"query": "q", "shield_ids": ["llama-guard"]})
        assert reply.status == 404, reply.body
        assert reply.json() == {"detail": {"response": "Shield(s) not found",
                                           "cause": "Shield(s) with ID(s) llama-guard do not exist"}}
    assert upstream.requests("/v1/responses") == [] and upstream.requests("/v1/conversations") == []
