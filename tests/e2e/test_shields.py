"""LCORE's shields through `gateway serve` (issue 21): `GET /v1/shields`, `shield_ids`
(unknown → 404, overriding where the operator disabled it → 422, nothing sent), and
the redaction shields rewriting the input on `/v1/responses`, `/v1/query`,
`/v1/streaming_query` and `/v1/infer` before the upstream or the turn store sees it."""

from __future__ import annotations

import pytest

from tests.support.gateway_db import GatewayDb

SHIELDS = [
    {"name": "pii", "provider_id": "redaction", "config": {"rules": [
        {"pattern": r"\b\d{3}-\d{2}-\d{4}\b", "replacement": "[SSN]"},
        {"pattern": "secret-project", "replacement": "[PROJECT]", "case_sensitive": True}]}},
    {"name": "names", "provider_id": "redaction", "config": {"case_sensitive": False, "rules": [
        {"pattern": "alice", "replacement": "[NAME]"}]}},
]
TEXT = "Alice's SSN is 123-45-6789 for secret-project and Secret-Project"
REDACTED = "[NAME]'s SSN is [SSN] for [PROJECT] and Secret-Project"


@pytest.fixture(scope="module")
def shielded(gateway_factory, upstream):
    return gateway_factory(upstream.url, shields=SHIELDS)


def test_the_shields_listed_in_lcores_shape(shielded):
    body = shielded.get("/v1/shields").ok()
    assert [(s["name"], s["provider_id"], s["type"]) for s in body["shields"]] == [
        ("pii", "redaction", "shield"), ("names", "redaction", "shield")]
    assert body["shields"][1]["config"] == {"case_sensitive": False, "rules": [
        {"pattern": "alice", "replacement": "[NAME]", "case_sensitive": None}]}


def test_without_shields_the_list_is_empty(gateway):
    assert gateway.get("/v1/shields").ok() == {"shields": []}


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"input": TEXT}),
    ("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": TEXT}]}]}),
    ("/v1/query", {"query": TEXT}),
    ("/v1/streaming_query", {"query": TEXT}),
    ("/v1/infer", {"question": TEXT}),
])
def test_redaction_before_anything_sees_the_input(shielded, upstream, path, body):
    upstream.clear()
    reply = shielded.post(f"{path}?user_id=redacted-user", body)
    assert reply.status == 200, reply.body
    sent = upstream.last()["body"]["input"]
    text = sent if isinstance(sent, str) else sent[0]["content"][0]["text"]
    assert text == REDACTED
    assert "123-45-6789" not in reply.body.decode()
    if path != "/v1/infer":   # stored turns keep only the rewritten question
        rows = GatewayDb.of(shielded)._query("SELECT content FROM gateway_turns ORDER BY rowid DESC LIMIT 1")
        assert "123-45-6789" not in rows[0]["content"] and "[SSN]" in rows[0]["content"]


def test_shield_ids_pick_the_shields(shielded, upstream):
    upstream.clear()
    shielded.post("/v1/responses", {"input": TEXT, "shield_ids": ["names"]}).ok()
    assert upstream.last()["body"]["input"] == "[NAME]'s SSN is 123-45-6789 for secret-project and Secret-Project"
    assert "shield_ids" not in upstream.last()["body"]
    shielded.post("/v1/responses", {"input": TEXT, "shield_ids": []}).ok()
    assert upstream.last()["body"]["input"] == TEXT


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"input": "hi", "shield_ids": ["pii", "nope", "gone"]}),
    ("/v1/query", {"query": "hi", "shield_ids": ["nope", "gone"]}),
    ("/v1/streaming_query", {"query": "hi", "shield_ids": ["nope", "gone"]}),
])
def test_unknown_shield_ids_are_404_and_nothing_is_sent(shielded, upstream, path, body):
    upstream.clear()
    reply = shielded.post(path, body)
    assert reply.status == 404, reply.body
    assert reply.json()["detail"] == {"response": "Shield(s) not found",
                                      "cause": "Shield(s) with ID(s) nope, gone do not exist"}
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []


def test_overriding_where_disabled_is_lcores_422(gateway_factory, upstream):
    locked = gateway_factory(upstream.url, shields=SHIELDS,
                             customization={"disable_shield_ids_override": True, "topic_summaries": False})
    upstream.clear()
    for path, body in (("/v1/responses", {"input": "hi", "shield_ids": ["pii"]}),
                       ("/v1/query", {"query": "hi", "shield_ids": []})):
        reply = locked.post(path, body)
        assert reply.status == 422, reply.body
        assert reply.json()["detail"] == {
            "response": "Shield IDs customization is disabled",
            "cause": "This instance does not support customizing shield IDs in the query request "
                     "(disable_shield_ids_override is set). Please remove the shield_ids field from your request."}
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []
    # Without shield_ids every shield runs.
    locked.post("/v1/responses", {"input": TEXT}).ok()
    assert upstream.last()["body"]["input"] == REDACTED
