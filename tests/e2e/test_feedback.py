"""LCORE's feedback through `gateway serve` (issue 22; lcore.md 1.3, 9): disabled → 403,
LCORE's validation, 404 unknown and 403 another user's conversation (no override), the
JSON file in LCORE's format plus a database row, and the status switch: unauthenticated
to read, admin to set, kept in the database so another replica sees it."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_db import GatewayDb

KEYS = {"alice": "alice-key-0001", "bob": "bob-key-0001", "admin": "admin-key-0001"}
RULES = [{"role": "chat", "actions": ["responses", "feedback"]}, {"role": "boss", "actions": ["admin"]}]
DISABLED = {"response": "Storing feedback is disabled", "cause": "Storing feedback is disabled."}


def keyed() -> dict:
    return {"authentication": {"module": "api-key-token", "api_key_config": {"keys": [
        {"key": key, "user_id": user, "roles": ["boss"] if user == "admin" else ["chat"]}
        for user, key in KEYS.items()]}}, "authorization": {"access_rules": RULES}}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def feedback_for(conversation: str, **extra) -> dict:
    return {"conversation_id": conversation, "user_question": "What?", "llm_response": "That.", **extra}


def test_disabled_by_default(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, **keyed())
    assert gateway.get("/v1/feedback/status").ok() == {"functionality": "feedback", "status": {"enabled": False}}
    reply = gateway.post("/v1/feedback", feedback_for("0" * 48, sentiment=1), headers=auth("alice"))
    assert reply.status == 403 and reply.json()["detail"] == DISABLED
    assert gateway.post("/v1/feedback", feedback_for("0" * 48, sentiment=1)).status == 401


@pytest.mark.parametrize("engine", [False, True], ids=["forward", "engine"])
def test_feedback_stored_as_lcore_does(engine, gateway_factory, upstream, chat_upstream, tmp_path):
    storage = tmp_path / "feedback"
    url = chat_upstream.url if engine else upstream.url
    gateway = gateway_factory(url, **keyed(), **(engine_config(url) if engine else {}), user_data_collection={
        "feedback_enabled": True, "feedback_storage": str(storage)})
    conversation = gateway.post("/v1/responses", {"input": "hi"}, headers=auth("alice")).ok()["conversation"]
    bare = conversation.removeprefix("conv_")
    body = feedback_for(conversation, sentiment=-1, user_feedback="too vague",
                        categories=["incorrect", "incorrect", "incomplete"])
    assert gateway.post("/v1/feedback", body, headers=auth("alice")).ok() == {"response": "feedback received"}
    assert gateway.post("/v1/feedback", body, headers=auth("alice")).status == 200   # duplicates are fine
    files = sorted(storage.glob("*.json"))
    assert len(files) == 2
    stored = json.loads(files[0].read_text())
    assert set(stored) == {"user_id", "timestamp", "conversation_id", "user_question", "llm_response", "sentiment",
                           "user_feedback", "categories"}
    assert stored["user_id"] == "alice" and stored["categories"] == ["incorrect", "incomplete"]
    db = sqlite3.connect(f"file:{GatewayDb.of(gateway).path}?mode=ro", uri=True)
    rows = db.execute("SELECT user_id, conversation_id FROM gateway_feedback").fetchall()
    assert rows == [("alice", bare), ("alice", bare)]

    # Another user's conversation: 403 with no override (even an admin's); an unknown one 404.
    for user in ("bob", "admin"):
        reply = gateway.post("/v1/feedback", feedback_for(conversation, sentiment=1), headers=auth(user))
        assert reply.status == 403 and reply.json()["detail"] == {
            "response": "User does not have permission to perform this action",
            "cause": f"User {user} does not have permission to submit feedback for conversation with ID {bare}"}
    reply = gateway.post("/v1/feedback", feedback_for("1" * 48, sentiment=1), headers=auth("alice"))
    assert reply.status == 404 and reply.json()["detail"]["response"] == "Conversation not found"

    # LCORE's validation, FastAPI's 422 list.
    for bad, message in ((feedback_for(conversation), "At least one form of feedback must be provided"),
                         (feedback_for(conversation, user_feedback=""), "At least one form of feedback"),
                         (feedback_for(conversation, sentiment=99), "Improper sentiment value of 99"),
                         (feedback_for("abc", sentiment=1), "Improper conversation ID abc"),
                         (feedback_for(conversation, sentiment=1, extra=1), "Extra inputs are not permitted"),
                         ({"conversation_id": conversation, "sentiment": 1}, "Field required")):
        reply = gateway.post("/v1/feedback", bad, headers=auth("alice"))
        assert reply.status == 422 and message in json.dumps(reply.json()["detail"]), (bad, reply.body)


def test_a_storage_that_cannot_be_written_is_a_500(gateway_factory, upstream, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    gateway = gateway_factory(upstream.url, user_data_collection={
        "feedback_enabled": True, "feedback_storage": str(blocker / "feedback")})
    conversation = gateway.post("/v1/responses", {"input": "hi"}).ok()["conversation"]
    reply = gateway.post("/v1/feedback", feedback_for(conversation, sentiment=1))
    assert reply.status == 500 and reply.json()["detail"] == {
        "response": "Failed to store feedback",
        "cause": f"Failed to store feedback at directory: {blocker / 'feedback'}"}   # LCORE's feedback_path_invalid


def test_the_switch_is_shared_by_replicas(gateway_factory, upstream, postgres, tmp_path):
    keys = postgres.new_database()
    settings = {**keyed(), "database": {"postgres": keys},
                "user_data_collection": {"feedback_enabled": True, "feedback_storage": str(tmp_path)}}
    one, two = gateway_factory(upstream.url, **settings), gateway_factory(upstream.url, **settings)
    assert two.get("/v1/feedback/status").ok()["status"] == {"enabled": True}
    assert one.request("PUT", "/v1/feedback/status", {"status": False}, headers=auth("alice")).status == 403
    changed = one.request("PUT", "/v1/feedback/status", {"status": False}, headers=auth("admin")).ok()["status"]
    assert changed["previous_status"] is True and changed["updated_status"] is False
    assert changed["updated_by"] == "admin" and changed["timestamp"]
    assert two.get("/v1/feedback/status").ok()["status"] == {"enabled": False}
    conversation = two.post("/v1/responses", {"input": "hi"}, headers=auth("alice")).ok()["conversation"]
    reply = two.post("/v1/feedback", feedback_for(conversation, sentiment=1), headers=auth("alice"))
    assert reply.status == 403 and reply.json()["detail"] == DISABLED
    two.request("PUT", "/v1/feedback/status", {"status": True}, headers=auth("admin")).ok()
    assert one.post("/v1/feedback", feedback_for(conversation, sentiment=1), headers=auth("alice")).status == 200
    assert one.request("PUT", "/v1/feedback/status", {"status": "maybe"}, headers=auth("admin")).status == 422


def test_without_access_rules_any_caller_switches_feedback(gateway_factory, upstream, tmp_path):
    """LCORE's scenarios enable and disable feedback with no `access_rules` configured (its
    resolver allows every action then): any authenticated caller may, and a disabled
    feedback is LCORE's 403 from then on."""
    keys = {"authentication": keyed()["authentication"]}   # the keys, no rules
    gateway = gateway_factory(upstream.url, **keys, user_data_collection={
        "feedback_enabled": True, "feedback_storage": str(tmp_path)})
    conversation = gateway.post("/v1/responses", {"input": "hi"}, headers=auth("alice")).ok()["conversation"]
    changed = gateway.request("PUT", "/v1/feedback/status", {"status": False}, headers=auth("alice")).ok()["status"]
    assert changed["previous_status"] is True and changed["updated_status"] is False
    assert changed["updated_by"] == "alice"
    reply = gateway.post("/v1/feedback", feedback_for(conversation, sentiment=1), headers=auth("alice"))
    assert reply.status == 403 and reply.json()["detail"] == DISABLED
    assert gateway.request("PUT", "/v1/feedback/status", {"status": True}).status == 401
    gateway.request("PUT", "/v1/feedback/status", {"status": True}, headers=auth("bob")).ok()
    assert gateway.post("/v1/feedback", feedback_for(conversation, sentiment=1), headers=auth("alice")).ok() == {
        "response": "feedback received"}
    # The admin-only routes that are not LCORE's stay closed without rules.
    assert gateway.get("/v1/quotas/cluster", headers=auth("alice")).status == 403
