"""LCORE's rlsapi v1 `POST /v1/infer` through `gateway serve` (issue 21): minimal and full
context, the sandboxed system prompt, verbose or not, unique request ids, nothing stored,
the configured MCP servers only, each quota subject (and none), LCORE's 422, 403 and 503."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timezone

import pytest

from tests.support.gateway_db import Counts, GatewayDb
from tests.support.processes import free_port

FULL = {"question": "  Why does this fail?  ",
        "context": {"stdin": "piped text", "attachments": {"contents": "key=value", "mimetype": "text/plain"},
                    "terminal": {"output": "bash: foo: command not found"},
                    "systeminfo": {"os": "RHEL", "version": "9.4", "arch": "x86_64", "id": "01JDKR8N7QW9"},
                    "cla": {"nevra": "command-line-assistant-0:0.2.0-1.el9.noarch", "version": "0.2.0"}},
        "skip_rag": True}
TEMPLATE = "Today is {{ date }}. You help on {{ os }} {{ version }} ({{ arch }})."
USER = {"type": "User", "org_id": "321", "account_number": "123",
        "user": {"user_id": "u-42", "username": "jdoe", "is_org_admin": False}}
SYSTEM = {"type": "System", "org_id": "654", "account_number": "123", "system": {"cn": "c87dcb4c-system"}}


def rh_header(identity: dict) -> dict[str, str]:
    return {"x-rh-identity": base64.b64encode(json.dumps({"identity": identity}).encode()).decode()}


@pytest.fixture(scope="module")
def infer_gateway(gateway_factory, upstream):
    return gateway_factory(upstream.url, customization={"system_prompt": TEMPLATE, "topic_summaries": False},
                           rlsapi_v1={"allow_verbose_infer": True},
                           mcp_servers=[{"name": "docs", "url": "http://127.0.0.1:9/docs"},
                                        {"name": "private", "url": "http://127.0.0.1:9/private",
                                         "authorization_headers": {"Authorization": "client"}}])


def test_minimal_question(infer_gateway, upstream):
    upstream.clear()
    reply = infer_gateway.post("/v1/infer", {"question": "How do I list files?"})
    data = reply.ok()
    assert set(data) == {"data"} and set(data["data"]) == {"text", "request_id"}
    assert data["data"]["text"] == "Scripted reply (turn 1, 1 messages): How do I list files?"
    uuid.UUID(data["data"]["request_id"])
    sent = upstream.last()["body"]
    assert sent["store"] is False and sent["stream"] is False and sent["input"] == "How do I list files?"
    assert "conversation" not in sent and "previous_response_id" not in sent
    date = datetime.now(timezone.utc).strftime("%B %d, %Y")
    assert sent["instructions"] == f"Today is {date}. You help on   ()."
    # The configured MCP servers whose headers resolve, nothing else (no file_search).
    assert [tool["server_label"] for tool in sent["tools"]] == ["docs"]
    # Nothing created upstream or recorded.
    assert not [r for r in upstream.requests() if r["path"].startswith("/v1/conversations")]
    assert GatewayDb.of(infer_gateway).counts() == Counts(0, 0)


def test_full_context_renders_the_prompt_and_joins_the_input(infer_gateway, upstream):
    upstream.clear()
    data = infer_gateway.post("/v1/infer", FULL).ok()["data"]
    sent = upstream.last()["body"]
    assert sent["input"] == "Why does this fail?\n\npiped text\n\nkey=value\n\nbash: foo: command not found"
    assert sent["instructions"].endswith("You help on RHEL 9.4 (x86_64).")
    assert set(data) == {"text", "request_id"}
    # A client's MCP-HEADERS let the server that needs them in.
    infer_gateway.post("/v1/infer", {"question": "hi"},
                       headers={"MCP-HEADERS": json.dumps({"private": {"Authorization": "Bearer tok-1"}})}).ok()
    assert [tool["server_label"] for tool in upstream.last()["body"]["tools"]] == ["docs", "private"]


def test_request_ids_are_unique(infer_gateway):
    ids = {infer_gateway.post("/v1/infer", {"question": f"q{n}"}).ok()["data"]["request_id"] for n in range(3)}
    assert len(ids) == 3


def test_verbose_only_with_both_opt_ins(infer_gateway, gateway_factory, upstream):
    data = infer_gateway.post("/v1/infer", {"question": "hi", "include_metadata": True}).ok()["data"]
    assert set(data) == {"text", "request_id", "tool_calls", "tool_results", "rag_chunks", "referenced_documents",
                         "input_tokens", "output_tokens"}
    assert data["input_tokens"] > 0 and data["output_tokens"] > 0
    assert [call["name"] for call in data["tool_calls"]] == ["mcp_list_tools"]   # the configured server's listing
    quiet = gateway_factory(upstream.url)   # allow_verbose_infer unset
    assert set(quiet.post("/v1/infer", {"question": "hi", "include_metadata": True}).ok()["data"]) == {
        "text", "request_id"}


@pytest.mark.parametrize("body, error", [
    ({"question": "   "}, {"type": "value_error", "loc": ["body", "question"],
                           "msg": "Value error, Question cannot be empty or whitespace-only", "input": "   ",
                           "ctx": {"error": {}}}),
    ({"question": ""}, {"type": "string_too_short", "loc": ["body", "question"],
                        "msg": "String should have at least 1 character", "input": "", "ctx": {"min_length": 1}}),
    ({}, {"type": "missing", "loc": ["body", "question"], "msg": "Field required", "input": {}}),
    ({"question": "hi", "extra": 1}, {"type": "extra_forbidden", "loc": ["body", "extra"],
                                      "msg": "Extra inputs are not permitted", "input": 1}),
    ({"question": "hi", "context": {"systeminfo": {"os": "<script>"}}},
     {"type": "string_pattern_mismatch", "loc": ["body", "context", "systeminfo", "os"],
      "msg": "String should match pattern '^[a-zA-Z0-9._ \\-]*$'", "input": "<script>",
      "ctx": {"pattern": "^[a-zA-Z0-9._ \\-]*$"}}),
])
def test_lcores_422(infer_gateway, upstream, body, error):
    upstream.clear()
    reply = infer_gateway.post("/v1/infer", body)
    assert reply.status == 422, reply.body
    assert reply.json()["detail"] == [error]
    assert upstream.requests() == []


def test_403_without_the_action(gateway_factory, upstream):
    ruled = gateway_factory(upstream.url, authorization={"access_rules": [{"role": "*", "actions": ["query"]}]})
    upstream.clear()
    reply = ruled.post("/v1/infer?user_id=u1", {"question": "hi"})
    assert reply.status == 403
    assert reply.json()["detail"] == {"response": "User does not have permission to access this endpoint",
                                      "cause": "User u1 is not authorized to access this endpoint."}
    assert upstream.requests() == []


def test_503_when_the_upstream_is_unreachable(gateway_factory):
    down = gateway_factory(f"http://127.0.0.1:{free_port()}", llama_stack={"allow_degraded_mode": True},
                           inference={"default_model": "scripted-chat", "default_provider": "scripted"})
    reply = down.post("/v1/infer", {"question": "hi"})
    assert reply.status == 503, reply.body
    assert reply.json()["detail"] == {"response": "Unable to connect to Llama Stack",
                                      "cause": "Unable to connect to the inference backend"}


def _quota_gateway(gateway_factory, upstream, tmp_path, subject: str | None, initial: int, db=None):
    db = db or {"sqlite": {"db_path": str(tmp_path / "gateway.db")}}
    return gateway_factory(upstream.url, database=db, authentication={"module": "rh-identity"},
                           rlsapi_v1={"quota_subject": subject} if subject else {},
                           quota_handlers={**db, "limiters": [{"name": "daily", "type": "user_limiter",
                                                               "initial_quota": initial, "quota_increase": 0,
                                                               "period": "1 day"}]})


@pytest.mark.parametrize("subject, identity, charged, engine", [
    ("user_id", USER, "u-42", "sqlite"), ("org_id", USER, "321", "sqlite"),
    ("system_id", SYSTEM, "c87dcb4c-system", "sqlite"),
    ("system_id", USER, "u-42", "sqlite"),   # a User has no system: the user id
    ("system_id", SYSTEM, "c87dcb4c-system", "postgres"),
])
def test_each_quota_subject(gateway_factory, upstream, tmp_path, request, subject, identity, charged, engine):
    db = {"postgres": request.getfixturevalue("postgres").new_database()} if engine == "postgres" else None
    empty = _quota_gateway(gateway_factory, upstream, tmp_path / "empty", subject, 0, db)
    reply = empty.post("/v1/infer", {"question": "hi"}, headers=rh_header(identity))
    assert reply.status == 429, reply.body
    assert reply.json()["detail"] == {"response": "The quota has been exceeded",
                                      "cause": f"User {charged} has no available tokens"}


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_subject_is_charged_and_without_one_nothing_is_checked(gateway_factory, upstream, tmp_path, request,
                                                                   engine):
    db = None
    if engine == "postgres":
        postgres = request.getfixturevalue("postgres")
        db = {"postgres": postgres.new_database()}
    charged = _quota_gateway(gateway_factory, upstream, tmp_path / "charged", "org_id", 100000, db)
    data = charged.post("/v1/infer", {"question": "hi"}, headers=rh_header(USER)).ok()["data"]
    assert set(data) == {"text", "request_id"}
    statement = "SELECT subject, available, reserved FROM gateway_quota_balances"
    if engine == "sqlite":
        rows = [(row["subject"], row["available"], row["reserved"])
                for row in GatewayDb.of(charged)._query(statement)]
    else:
        keys = db["postgres"]
        namespace = keys["namespace"]
        rows = [tuple(row) for row in postgres.admin(f'SET search_path TO "{namespace}"', statement, db=keys["db"])]
        rows = [(subject, int(available), int(reserved)) for subject, available, reserved in rows]
    assert [subject for subject, _, _ in rows] == ["321"]
    assert rows[0][1] + rows[0][2] < 100000     # charged (PostgreSQL: this replica may still hold a spare)
    unchecked = _quota_gateway(gateway_factory, upstream, tmp_path / "unchecked", None, 0, db and {
        "postgres": request.getfixturevalue("postgres").new_database()})
    assert unchecked.post("/v1/infer", {"question": "hi"}, headers=rh_header(USER)).status == 200
