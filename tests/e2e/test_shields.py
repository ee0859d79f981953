"""LCORE's shields through `gateway serve` (issue 21): `GET /v1/shields`, `shield_ids`
(unknown → 404, overriding where the operator disabled it → 422, nothing sent), and
the redaction shields rewriting the input on `/v1/responses`, `/v1/query`,
`/v1/streaming_query` and `/v1/infer` before the upstream or the turn store sees it."""

from __future__ import annotations

import json

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


# The scripted upstream answers exactly what follows `scripted-answer:`, so each shield's
# prompt scripts its verdict: `strict` rejects every question, `lenient` allows it.
VALIDITY = [
    {"name": "strict", "provider_id": "question_validity",
     "config": {"model_prompt": "Judge: ${message}\nscripted-answer: ${rejected}",
                "invalid_question_response": "Off topic."}},
    {"name": "lenient", "provider_id": "question_validity",
     "config": {"model_prompt": "Judge: ${message}\nscripted-answer: ${allowed}"}},
    {"name": "plain", "provider_id": "question_validity"},   # LCORE's prompt: the echo is no ALLOWED
]
DAILY = {"name": "daily", "type": "user_limiter", "initial_quota": 100000, "quota_increase": 0, "period": "1 day"}


@pytest.fixture(scope="module")
def judged(gateway_factory, upstream, tmp_path_factory):
    db = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("judged") / "gateway.db")}}
    return gateway_factory(upstream.url, database=db, shields=VALIDITY,
                           quota_handlers={**db, "limiters": [DAILY]})


def _calls(upstream) -> list[dict]:
    return [r for r in upstream.requests() if r["method"] == "POST" and r["path"] == "/v1/responses"]


def _balance(gateway, user: str) -> int:
    return gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def test_a_blocked_response_is_a_200_with_the_shields_message(judged, upstream):
    upstream.clear()
    before = _balance(judged, "blocked-1")
    body = judged.post("/v1/responses?user_id=blocked-1", {"input": "Why is the sky blue?",
                                                           "shield_ids": ["strict"]}).ok()
    assert body["id"].startswith("modr-") and body["status"] == "completed"
    assert body["output_text"] == "Off topic." and body["usage"]["input_tokens"] == 0
    assert body["conversation"].startswith("conv_")
    # One upstream call: the check (never stored); the question never reached the model.
    calls = _calls(upstream)
    assert len(calls) == 1 and calls[0]["body"]["store"] is False
    assert calls[0]["body"]["input"] == "Judge: Why is the sky blue?\nscripted-answer: REJECTED"
    # Nothing charged; the turn recorded, and appended to the upstream conversation.
    assert _balance(judged, "blocked-1") == before
    rows = GatewayDb.of(judged)._query("SELECT response_id FROM gateway_turns WHERE response_id = ?", (body["id"],))
    assert len(rows) == 1
    appended = [r for r in upstream.requests() if r["path"].endswith("/items") and r["method"] == "POST"]
    assert appended and "Why is the sky blue?" in json.dumps(appended[-1]["body"])
    # The conversation goes on.
    later = judged.post("/v1/responses?user_id=blocked-1", {"input": "Next?", "conversation": body["conversation"],
                                                            "shield_ids": ["lenient"]}).ok()
    assert later["output_text"].startswith("Scripted reply")


def test_a_blocked_response_stream(judged, upstream):
    status, frames = judged.stream({"input": "hi", "shield_ids": ["plain"]})
    assert status == 200
    kinds = [event for event, _ in frames]
    assert kinds == ["response.created", "response.output_item.added", "response.output_item.done",
                     "response.completed", None]
    completed = frames[3][1]["response"]
    assert completed["id"].startswith("modr-") and completed["output_text"] == \
        "I cannot process this request due to policy restrictions."


def test_an_allowed_question_runs(judged, upstream):
    upstream.clear()
    body = judged.post("/v1/responses", {"input": "What is a pod?", "shield_ids": ["lenient"]}).ok()
    assert body["output_text"].startswith("Scripted reply") and not body["id"].startswith("modr-")
    assert len(_calls(upstream)) == 2   # the check, then the turn


def test_blocked_on_the_query_api_and_infer(judged, upstream):
    reply = judged.post("/v1/query?user_id=blocked-2", {"query": "hi", "shield_ids": ["strict"]}).ok()
    assert reply["response"] == "Off topic." and reply["input_tokens"] == 0
    history = judged.get(f"/v1/conversations/{reply['conversation_id']}?user_id=blocked-2").ok()
    assert history["chat_history"][0]["messages"][-1]["content"] == "Off topic."
    stream = judged.post("/v1/streaming_query?user_id=blocked-2", {"query": "hi", "shield_ids": ["strict"]})
    assert stream.status == 200
    events = [json.loads(line[6:]) for line in stream.body.decode().split("\n\n") if line.startswith("data: ")]
    assert [event["event"] for event in events] == ["start", "token", "end"]
    assert events[1]["data"] == {"id": 0, "token": "Off topic."}
    assert events[2]["available_quotas"] == {"daily": 100000}
    plain = judged.post("/v1/streaming_query", {"query": "hi", "shield_ids": ["strict"], "media_type": "text/plain"})
    assert plain.body == b"Off topic."
    # /v1/infer has no shield_ids: every shield runs, `strict` first.
    data = judged.post("/v1/infer", {"question": "hi"}).ok()["data"]
    assert data["text"] == "Off topic." and set(data) == {"text", "request_id"}


def test_blocked_turns_in_engine_mode_and_chains_past_them(gateway_factory, chat_upstream):
    """The engine continues a conversation from its last stored response, which a blocked
    turn (`modr-`, in no backend) is not: the next turn chains from the last turn that
    ran, or from nothing; the history keeps every turn."""
    engine = gateway_factory(chat_upstream.url, shields=VALIDITY,
                             llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"})
    blocked = engine.post("/v1/query?user_id=eng", {"query": "first", "shield_ids": ["strict"]}).ok()
    assert blocked["response"] == "Off topic."
    conversation = blocked["conversation_id"]
    allowed = engine.post("/v1/query?user_id=eng", {"query": "second", "conversation_id": conversation,
                                                    "shield_ids": ["lenient"]}).ok()
    assert allowed["response"] == "Scripted reply (turn 1, 1 messages): second"
    again = engine.post("/v1/query?user_id=eng", {"query": "third", "conversation_id": conversation,
                                                  "shield_ids": ["strict"]}).ok()
    assert again["response"] == "Off topic."
    last = engine.post("/v1/query?user_id=eng", {"query": "fourth", "conversation_id": conversation,
                                                 "shield_ids": ["lenient"]}).ok()
    assert last["response"] == "Scripted reply (turn 2, 3 messages): fourth"   # chained past the blocked one
    history = engine.get(f"/v1/conversations/{conversation}?user_id=eng").ok()["chat_history"]
    assert len(history) == 4
    # Naming a blocked response as previous_response_id is LCORE's 422.
    modr = engine.post("/v1/responses?user_id=eng2", {"input": "two", "shield_ids": ["strict"]}).ok()
    reply = engine.post("/v1/responses?user_id=eng2", {"input": "three", "previous_response_id": modr["id"]})
    assert reply.status == 422 and "moderation response" in reply.json()["detail"][0]["msg"]


def test_a_turn_without_user_text_asks_no_question(judged, upstream):
    """A function tool's output sent back is no question: not judged, not blocked."""
    upstream.clear()
    body = judged.post("/v1/responses", {"input": [{"type": "function_call_output", "call_id": "call_1",
                                                    "output": "42"}], "shield_ids": ["strict"]})
    assert body.status != 200 or not body.json()["id"].startswith("modr-")
    assert not any("scripted-answer" in json.dumps(r["body"]) for r in _calls(upstream))


def _sample(gateway, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families
    total = 0.0
    reply = gateway.get("/metrics")
    assert reply.status == 200, reply.body[:300]
    for family in text_string_to_metric_families(reply.body.decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_a_blocked_question_is_a_validation_error_not_a_model_call(judged):
    """docs/operating.md: a blocked question counts once in `ls_llm_validation_errors_total`
    and in no LLM counter (the check's own call is the gateway's)."""
    errors = _sample(judged, "ls_llm_validation_errors_total", endpoint="/v1/responses")
    calls = _sample(judged, "ls_llm_calls_total")
    sent = _sample(judged, "ls_llm_token_sent_total")
    judged.post("/v1/responses?user_id=blocked-3", {"input": "hi", "shield_ids": ["strict"]}).ok()
    assert _sample(judged, "ls_llm_validation_errors_total", endpoint="/v1/responses") == errors + 1
    assert _sample(judged, "ls_llm_calls_total") == calls
    assert _sample(judged, "ls_llm_token_sent_total") == sent


# Issue 39: a turn whose input holds a `compaction` item is redacted like any other. The
# item's summary, sealed here with the gateway's key (as a summary made before the shield
# existed would be), holds the SSN too.
KEY = {"id": "k1", "secret": "k1-secret-0123456789abcdefghijklmnopqrstuv"}
TITLE_PROMPT = "Title this conversation."
JUDGE = {"name": "judge", "provider_id": "question_validity",
         "config": {"model_prompt": "Judge: ${message}\nscripted-answer: ${allowed}"}}


def _sealed(user: str, summary: str) -> dict:
    from gateway.compaction.seal import CompactionSeal
    from gateway.config.compaction import CompactionKey
    return {"type": "compaction", "id": "cmp_1",
            "encrypted_content": CompactionSeal([CompactionKey(**KEY)]).seal(user, summary)}


@pytest.fixture(scope="module", params=["forward", "engine"])
def compacting(request, gateway_factory, upstream, chat_upstream):
    target = upstream if request.param == "forward" else chat_upstream
    llama_stack = {"url": target.url, "max_retries": 0,
                   **({"api": "chat_completions"} if request.param == "engine" else {"conversations": "gateway"})}
    gateway = gateway_factory(target.url, llama_stack=llama_stack, shields=[*SHIELDS, JUDGE],
                              response_compaction={"keys": [KEY]},
                              customization={"topic_summaries": True, "topic_summary_prompt": TITLE_PROMPT})
    return gateway, target, request.param


def _nothing_unredacted(gateway, target) -> None:
    """Neither the upstream nor the gateway's database ever got the SSN."""
    assert "123-45-6789" not in json.dumps(target.requests())
    db = GatewayDb.of(gateway)
    for table in ("gateway_turns", "gateway_conversations", "gateway_conversation_items"):
        assert "123-45-6789" not in json.dumps(db._query(f"SELECT * FROM {table}"), default=str), table


@pytest.mark.parametrize("stream", [False, True])
def test_a_compacted_turn_is_redacted_for_the_model_the_store_and_the_summaries(compacting, stream):
    gateway, target, mode = compacting
    user = f"compacted-{mode}-{stream}"
    target.clear()
    body = {"input": [_sealed(user, "Earlier, the SSN 123-45-6789 was given."),
                      {"role": "user", "content": [{"type": "input_text", "text": TEXT}]}], "stream": stream}
    reply = gateway.post(f"/v1/responses?user_id={user}", body)
    assert reply.status == 200, reply.body
    assert "123-45-6789" not in reply.body.decode()
    sent = json.dumps(target.requests())
    # The model got the summary and the question, both redacted.
    assert "Earlier, the SSN [SSN] was given." in sent and REDACTED in sent
    # The question-validity shield and the topic summary were asked the redacted question.
    assert json.dumps(f"Judge: {REDACTED}")[1:-1] in sent
    titles = [r for r in target.requests() if TITLE_PROMPT in json.dumps(r["body"])]
    assert titles and all(REDACTED in json.dumps(r["body"]) for r in titles)
    # The stored question is the client's own words, redacted (not the summary).
    conversation = GatewayDb.of(gateway)._query(
        "SELECT id FROM gateway_conversations WHERE user_id = ?", (user,))[0]["id"]
    history = gateway.get(f"/v1/conversations/{conversation}?user_id={user}").ok()["chat_history"]
    assert history[0]["messages"][0]["content"] == REDACTED
    _nothing_unredacted(gateway, target)


@pytest.mark.parametrize("upstream_kept", [False, True])
def test_items_added_to_a_conversation_are_redacted(gateway_factory, upstream, compacting, upstream_kept):
    """Items added through OpenAI's Conversations API are kept (or relayed to the
    upstream's conversation) redacted, and reach the model as the next turn's input so."""
    gateway, target, mode = compacting
    if upstream_kept:
        if mode == "engine":
            pytest.skip("the engine's conversations are the gateway's")
        gateway = gateway_factory(upstream.url, shields=SHIELDS)   # Llama Stack keeps the conversation
    user = f"added-{mode}-{upstream_kept}"
    target.clear()
    conversation = gateway.post(f"/v1/conversations?user_id={user}", {
        "items": [{"role": "user", "content": "First: alice"}]}).ok()["id"]
    added = gateway.post(f"/v1/conversations/{conversation}/items?user_id={user}",
                         {"items": [{"role": "user", "content": "Note: my SSN is 123-45-6789."},
                                    {"role": "assistant", "content": "Noted 123-45-6789."}]}).ok()["data"]
    if not upstream_kept:   # the gateway lists them as it keeps them
        assert [item["content"][0]["text"] for item in added] == ["Note: my SSN is [SSN].", "Noted 123-45-6789."]
    gateway.post(f"/v1/responses?user_id={user}", {"input": "and then?", "conversation": conversation}).ok()
    sent = json.dumps(target.requests())
    assert "First: [NAME]" in sent and "Note: my SSN is [SSN]." in sent
    assert "123-45-6789." not in sent.replace("Noted 123-45-6789.", "")   # the assistant's words are its own
    assert "alice" not in sent
