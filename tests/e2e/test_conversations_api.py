"""LCORE's conversation endpoints through `gateway serve` (issue 22; lcore.md 4, 9):
`/v1/conversations` (list, get, rename, delete) in forward mode and over the local
engine, from the gateway's own turn store; another user's, unknown and malformed ids;
the RBAC overrides; and `/v1` with the upstream down (503; a delete deletes the gateway's
row, answers LCORE's 503 and the upstream's part is done later)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.support.engine_gateway import engine_config
from tests.support.gateway_db import GatewayDb
from tests.support.gateway_proc import start_gateway, start_upstream
from tests.support.processes import free_port, python_module, spawn, wait_http

KEYS = {"alice": "alice-key-0001", "bob": "bob-key-0001", "auditor": "auditor-key-0001", "quentin": "quentin-key-0001"}
CHAT = ["responses", "query", "streaming_query", "list_conversations", "get_conversation", "update_conversation",
        "delete_conversation"]
ACCESS_RULES = [{"role": "chat", "actions": CHAT},
                {"role": "auditor", "actions": ["read_other_conversations", "delete_other_conversations",
                                                "query_other_conversations", "list_other_conversations"]}]
UNKNOWN = "0" * 48
NAIVE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
ZULU = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


# OpenAI's keys beside LCORE's on `GET`/`DELETE` (issue 23); `service.error_body: lcore`
# leaves LCORE's alone: every test here runs on both.
OPENAI_KEYS = ("id", "object", "created_at", "metadata")


def lcore(body: dict, gateway) -> dict:
    """LCORE's part of a body that serves OpenAI's clients too with `error_body: both`
    (checking OpenAI's `id` names the same conversation); the body itself with `lcore`."""
    if gateway.error_body == "lcore":
        assert not set(OPENAI_KEYS) & set(body)
    else:
        assert body["id"].removeprefix("conv_") == body["conversation_id"].removeprefix("conv_")
        assert body["object"].startswith("conv")
    return {key: value for key, value in body.items() if key not in OPENAI_KEYS}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


@pytest.fixture(scope="module", params=["forward", "engine"])
def mode(request) -> str:
    return request.param


@pytest.fixture(scope="module", params=["both", "lcore"])
def error_body(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def gateway(mode, error_body, gateway_factory, upstream, chat_upstream):
    keyed = {"service": {"error_body": error_body}, "authentication": {"module": "api-key-token", "api_key_config": {"keys": [
        {"key": key, "user_id": user, "roles": ["chat", "auditor"] if user == "auditor" else ["chat"]}
        for user, key in KEYS.items()]}}, "authorization": {"access_rules": ACCESS_RULES},
        "customization": {"topic_summaries": True}}
    if mode == "forward":
        started = gateway_factory(upstream.url, **keyed)
    else:
        started = gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url), **keyed)
    started.error_body = error_body
    return started


def new_conversation(gateway, user: str, text: str) -> dict:
    return gateway.post("/v1/responses", {"input": text}, headers=auth(user)).ok()


def test_list_get_rename_and_delete_ones_own(gateway, mode, upstream):
    first = new_conversation(gateway, "alice", "hello there, say hi")
    cid = first["conversation"].removeprefix("conv_")
    second = gateway.post("/v1/responses", {"input": "and again", "conversation": first["conversation"]},
                          headers=auth("alice")).ok()
    newer = new_conversation(gateway, "alice", "a newer one")["conversation"].removeprefix("conv_")

    listed = gateway.get("/v1/conversations", headers=auth("alice")).ok()["conversations"]
    ids = [item["conversation_id"] for item in listed]
    assert ids.index(newer) < ids.index(cid)   # newest first
    item = listed[ids.index(cid)]
    assert set(item) == {"conversation_id", "created_at", "last_message_at", "message_count", "last_used_model",
                         "last_used_provider", "topic_summary"}
    assert item["message_count"] == 2 and item["last_used_model"]
    assert item["topic_summary"].startswith("Scripted reply")
    assert NAIVE.match(item["created_at"]) and NAIVE.match(item["last_message_at"])
    page = gateway.get(f"/v1/conversations?limit=1&after={newer}", headers=auth("alice")).ok()["conversations"]
    assert len(page) == 1 and page[0]["conversation_id"] == ids[ids.index(newer) + 1]

    # The id in the form the path named it in: `conv_…` as /v1/responses gave it, bare as LCORE does.
    got = gateway.get(f"/v1/conversations/{first['conversation']}", headers=auth("alice")).ok()
    assert got["conversation_id"] == first["conversation"] and len(got["chat_history"]) == 2
    assert lcore(gateway.get(f"/v1/conversations/{cid}", headers=auth("alice")).ok(), gateway) == {
        **lcore(got, gateway), "conversation_id": cid}
    turn = got["chat_history"][0]
    assert set(turn) == {"messages", "tool_calls", "tool_results", "provider", "model", "started_at", "completed_at"}
    assert turn["messages"] == [
        {"content": "hello there, say hi", "type": "user", "referenced_documents": None},
        {"content": first["output_text"], "type": "assistant", "referenced_documents": None}]
    assert turn["tool_calls"] == [] and turn["tool_results"] == []
    assert turn["model"] == item["last_used_model"] and ZULU.match(turn["started_at"])
    assert got["chat_history"][1]["messages"][1]["content"] == second["output_text"]

    upstream.clear()
    renamed = gateway.request("PUT", f"/v1/conversations/{cid}", {"topic_summary": "Greetings"},
                              headers=auth("alice")).ok()
    assert renamed == {"conversation_id": cid, "success": True, "message": "Topic summary updated successfully"}
    listed = gateway.get("/v1/conversations", headers=auth("alice")).ok()["conversations"]
    assert [c["topic_summary"] for c in listed if c["conversation_id"] == cid] == ["Greetings"]
    if mode == "forward":   # the upstream's conversation gets it too, as LCORE does
        assert upstream.last(f"/v1/conversations/conv_{cid}")["body"] == {"metadata": {"topic_summary": "Greetings"}}

    upstream.clear()
    deleted = lcore(gateway.delete(f"/v1/conversations/{cid}", headers=auth("alice")).ok(), gateway)
    assert deleted == {"conversation_id": cid, "deleted": True, "response": "Conversation deleted successfully",
                       "success": True}
    if mode == "forward":   # its upstream state: the conversation and the stored responses
        gone = {r["path"] for r in upstream.requests() if r["method"] == "DELETE"}
        assert gone == {f"/v1/conversations/conv_{cid}", f"/v1/responses/{first['id']}",
                        f"/v1/responses/{second['id']}"}
    assert gateway.get(f"/v1/conversations/{cid}", headers=auth("alice")).status == 404
    db = GatewayDb.of(gateway)
    assert db.conversation(cid) is None and db.turn(first["id"]) is None and db.turn(second["id"]) is None
    again = lcore(gateway.delete(f"/v1/conversations/{cid}", headers=auth("alice")).ok(), gateway)
    assert again == {"conversation_id": cid, "deleted": False, "response": "Conversation not found", "success": True}
    # The deleted conversation cannot be continued.
    assert gateway.post("/v1/responses", {"input": "more", "conversation": first["conversation"]},
                        headers=auth("alice")).status == 404


def test_another_users_unknown_and_malformed_ids(gateway):
    cid = new_conversation(gateway, "alice", "mine")["conversation"].removeprefix("conv_")
    assert cid not in [c["conversation_id"] for c in gateway.get("/v1/conversations", headers=auth("bob")).ok()[
        "conversations"]]
    for method, verb, body in (("GET", "read", None), ("PUT", "update", {"topic_summary": "x"}),
                               ("DELETE", "delete", None)):
        reply = gateway.request(method, f"/v1/conversations/{cid}", body, headers=auth("bob"))
        assert reply.status == 403, reply.body
        assert reply.json()["detail"] == {"response": "User does not have permission to perform this action",
                                          "cause": f"User bob does not have permission to {verb} conversation "
                                                   f"with ID {cid}"}
        unknown = gateway.request(method, f"/v1/conversations/{UNKNOWN}", body, headers=auth("bob"))
        if method == "DELETE":
            assert unknown.ok()["deleted"] is False
        else:
            assert unknown.status == 404 and unknown.json()["detail"] == {
                "response": "Conversation not found", "cause": f"Conversation with ID {UNKNOWN} does not exist"}
        malformed = gateway.request(method, "/v1/conversations/abcdef", body, headers=auth("bob"))
        assert malformed.status == 400 and malformed.json()["detail"] == {
            "response": "Invalid conversation ID format", "cause": "The conversation ID abcdef has invalid format."}
    # The actions that allow it: read and rename, list everyone's, then delete.
    assert gateway.get(f"/v1/conversations/{cid}", headers=auth("auditor")).ok()["conversation_id"] == cid
    gateway.request("PUT", f"/v1/conversations/{cid}", {"topic_summary": "audited"}, headers=auth("auditor")).ok()
    assert cid in [c["conversation_id"] for c in gateway.get("/v1/conversations", headers=auth("auditor")).ok()[
        "conversations"]]
    assert gateway.delete(f"/v1/conversations/{cid}", headers=auth("auditor")).ok()["deleted"] is True


def test_bad_bodies_and_pages_are_422s(gateway):
    cid = new_conversation(gateway, "alice", "to rename")["conversation"].removeprefix("conv_")
    for body in ({"topic_summary": ""}, {}, {"topic_summary": "x", "extra": 1}, {"topic_summary": "x" * 1001}):
        reply = gateway.request("PUT", f"/v1/conversations/{cid}", body, headers=auth("alice"))
        assert reply.status == 422 and isinstance(reply.json()["detail"], list), reply.body
    for query in ("limit=0", "limit=x", "limit=1001"):
        reply = gateway.get(f"/v1/conversations?{query}", headers=auth("alice"))
        assert reply.status == 422 and reply.json()["detail"][0]["loc"] == ["query", "limit"]
    assert gateway.get("/v1/conversations?after=nope", headers=auth("alice")).status == 400


@pytest.mark.parametrize("engine", [False, True], ids=["forward", "engine"])
def test_v1_with_the_upstream_down(engine, gateway_factory, tmp_path):
    flags = ("--no-responses",) if engine else ()
    dying = start_upstream(tmp_path, *flags)
    extra = engine_config(dying.url) if engine else {}
    gateway = gateway_factory(dying.url, **extra)
    first = gateway.post("/v1/responses?user_id=u", {"input": "before the outage"}).ok()
    cid = first["conversation"].removeprefix("conv_")
    other = gateway.post("/v1/responses?user_id=u", {"input": "another"}).ok()["conversation"]
    dying.stop()
    unavailable = {"response": "Unable to connect to Llama Stack", "cause": "Connection error."}
    reply = gateway.get(f"/v1/conversations/{cid}?user_id=u")
    assert reply.status == 503 and reply.json()["detail"] == unavailable
    reply = gateway.request("PUT", f"/v1/conversations/{cid}?user_id=u", {"topic_summary": "x"})
    assert reply.status == 503 and reply.json()["detail"] == unavailable
    assert len(gateway.get("/v1/conversations?user_id=u").ok()["conversations"]) == 2   # the list is the gateway's
    reply = gateway.delete(f"/v1/conversations/{other}?user_id=u")
    if engine:   # nothing of it upstream: deleted
        assert reply.ok()["deleted"] is True
    else:   # LCORE: its own row deleted, then its 503 for the upstream's part (retried)
        assert reply.status == 503 and reply.json()["detail"] == unavailable
        assert "its upstream state was not" in gateway.log()
    assert len(gateway.get("/v1/conversations?user_id=u").ok()["conversations"]) == 1


def test_a_delete_the_upstream_missed_is_done_once_it_is_back(gateway_factory, upstream, tmp_path):
    """The upstream behind a relay that is stopped and started again on its port: a
    delete while it is away is LCORE's 503 (the configured name) and the gateway's row is
    gone; the upstream's deletion is done when the client deletes it again, and by a
    gateway starting on the same database."""
    port = free_port()

    def link():
        relay = spawn(f"relay-{port}-{time.monotonic_ns()}", python_module(
            "tests.support.recording_proxy", "--listen", str(port), "--target", str(upstream.port),
            "--record", str(tmp_path / "relayed.bin")), tmp_path)
        wait_http(relay, f"http://127.0.0.1:{port}/health")
        return relay

    def deleted_upstream(cid):
        return [r["path"] for r in upstream.requests() if r["method"] == "DELETE" and cid in r["path"]]

    relay = link()
    gateway = gateway_factory(f"http://127.0.0.1:{port}", service={"error_body": "lcore"},
                              llama_stack={"display_name": "OGX"})
    first, second = (gateway.post("/v1/query?user_id=u", {"query": text}).ok()["conversation_id"]
                     for text in ("first", "second"))
    relay.stop()
    unavailable = {"detail": {"response": "Unable to connect to OGX", "cause": "Connection error."}}
    for cid in (first, second):
        reply = gateway.delete(f"/v1/conversations/{cid}?user_id=u")
        assert reply.status == 503 and reply.json() == unavailable
    assert gateway.get("/v1/conversations?user_id=u").ok()["conversations"] == []   # the gateway's rows are gone
    reply = gateway.delete(f"/v1/conversations/{first}?user_id=u")   # again, still away: still pending
    assert reply.status == 503 and reply.json() == unavailable
    upstream.clear()
    relay = link()
    try:
        # Deleted again with the upstream back: its deletion is done now, LCORE's answer.
        reply = gateway.delete(f"/v1/conversations/{first}?user_id=u")
        assert reply.ok() == {"conversation_id": first, "deleted": False, "response": "Conversation not found",
                              "success": True}
        assert deleted_upstream(first) == [f"/v1/conversations/conv_{first}"]
        assert upstream.get(f"/v1/conversations/conv_{first}").status == 404
        assert gateway.delete(f"/v1/conversations/{first}?user_id=u").ok()["success"] is True
        assert deleted_upstream(first) == [f"/v1/conversations/conv_{first}"]   # done: not asked again
        # A gateway starting on the same database does what is still pending.
        assert deleted_upstream(second) == []
        gateway.stop()
        restarted = start_gateway(tmp_path / "restarted", yaml.safe_load(gateway.config_path.read_text()))
        try:
            deadline = time.monotonic() + 15
            while not deleted_upstream(second) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert deleted_upstream(second) == [f"/v1/conversations/conv_{second}"]
        finally:
            restarted.stop()
    finally:
        relay.stop()


def test_a_turns_tools_and_documents_are_in_its_history(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"}])
    answered = gateway.post("/v1/responses?user_id=t", {"input": "search the handbook please"}).ok()
    searches = [item for item in answered["output"] if item["type"] == "file_search_call"]
    assert searches, answered["output"]
    history = gateway.get(f"/v1/conversations/{answered['conversation']}?user_id=t").ok()["chat_history"]
    [turn] = history
    assert [call["type"] for call in turn["tool_calls"]] == ["file_search_call"]
    assert turn["tool_calls"][0]["id"] == searches[0]["id"]
    assert [result["type"] for result in turn["tool_results"]] == ["file_search_call"]
    assert [document["doc_title"] for document in turn["messages"][1]["referenced_documents"]] == [
        "scripted-handbook.txt"]


FIXTURES = Path(__file__).parents[1] / "fixtures" / "lcore"


def keys(value):
    """The keys of every object in a body, in order (lists by their first element)."""
    if isinstance(value, dict):
        return [(key, keys(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [keys(value[0])] if value else []
    return None


def test_bodies_have_the_keys_and_time_forms_of_a_real_lcore(gateway):
    recorded_list = json.loads((FIXTURES / "conversations.json").read_text())
    recorded_get = json.loads((FIXTURES / "conversation-get.json").read_text())
    cid = new_conversation(gateway, "alice", "hello there, say hi")["conversation"].removeprefix("conv_")
    listed = gateway.get("/v1/conversations?limit=1", headers=auth("alice")).ok()
    got = lcore(gateway.get(f"/v1/conversations/{cid}", headers=auth("alice")).ok(), gateway)
    assert keys(listed) == keys(recorded_list) and keys(got) == keys(recorded_get)
    for ours, theirs in ((listed["conversations"][0], recorded_list["conversations"][0]),
                         (got["chat_history"][0], recorded_get["chat_history"][0])):
        for field in ("created_at", "last_message_at", "started_at", "completed_at"):
            if field in theirs:
                pattern = ZULU if theirs[field].endswith("Z") else NAIVE
                assert pattern.match(theirs[field]) and pattern.match(ours[field]), field


def test_the_query_apis_turns_are_listed_with_their_message_count(gateway, mode):
    """LCORE's conversations feature: turns made through `/v1/query` and
    `/v1/streaming_query` show in the list, each turn one message."""
    first = gateway.post("/v1/query", {"query": "hello from the query API"}, headers=auth("quentin")).ok()
    cid = first["conversation_id"]
    gateway.post("/v1/query", {"query": "and again", "conversation_id": cid}, headers=auth("quentin")).ok()
    streamed = gateway.post("/v1/streaming_query", {"query": "streamed on", "conversation_id": cid},
                            headers=auth("quentin"))
    assert streamed.status == 200 and b'"event": "end"' in streamed.body
    listed = gateway.get("/v1/conversations", headers=auth("quentin")).ok()["conversations"]
    item = next(item for item in listed if item["conversation_id"] == cid)
    assert item["message_count"] == 3 and item["last_used_model"]
    history = gateway.get(f"/v1/conversations/{cid}", headers=auth("quentin")).ok()["chat_history"]
    assert len(history) == 3


def test_a_conversations_model_is_lcores_bare_id_beside_its_provider(gateway_factory, upstream_with):
    """In front of an upstream naming its models as Llama Stack does (`scripted/scripted-chat`,
    provider `scripted`), the list's `last_used_model` and each turn's `model` are LCORE's
    `scripted-chat`, with `scripted` as the provider, on v1 and v2, whichever way the turn
    named its model."""
    named = upstream_with("--provider-ids")
    gateway = gateway_factory(named.url, conversation_cache={"type": "sqlite",
                                                             "sqlite": {"db_path": "/tmp/unused-by-the-gateway.db"}})
    assert "scripted/scripted-chat" in [model["id"] for model in gateway.get("/v1/models").ok()["data"]]
    by_query = gateway.post("/v1/query?user_id=mo", {"query": "hi", "provider": "scripted",
                                                     "model": "scripted-chat"}).ok()["conversation_id"]
    by_responses = gateway.post("/v1/responses?user_id=mo", {"input": "hello"}).ok()["conversation"]
    gateway.post("/v1/responses?user_id=mo", {"input": "again", "conversation": by_responses,
                                              "model": "scripted/scripted-chat"}).ok()
    listed = gateway.get("/v1/conversations?user_id=mo").ok()["conversations"]
    assert sorted(item["conversation_id"] for item in listed) == sorted([by_query, by_responses.removeprefix("conv_")])
    assert {(item["last_used_model"], item["last_used_provider"]) for item in listed} == {("scripted-chat", "scripted")}
    for version in ("v1", "v2"):
        for cid in (by_query, by_responses):
            history = gateway.get(f"/{version}/conversations/{cid}?user_id=mo").ok()["chat_history"]
            assert history and {(turn["model"], turn["provider"]) for turn in history} == {("scripted-chat", "scripted")}


def test_a_fork_answers_in_the_form_the_client_named_its_conversation(gateway_factory, upstream):
    """`conversation` is answered in the form the client named the conversation in, and
    a turn continuing or forking from one of its turns by `previous_response_id` keeps
    that form: LCORE's clients (the bare 48 hex) compare the fork's `conversation` with
    `GET /v1/conversations/{id}`'s `conversation_id` byte for byte; OpenAI's keep `conv_`."""
    gateway = gateway_factory(upstream.url)
    bare = gateway.post("/v1/query?user_id=fk", {"query": "one"}).ok()["conversation_id"]
    second = gateway.post("/v1/responses?user_id=fk", {"input": "two", "conversation": bare}).ok()
    assert second["conversation"] == bare
    third = gateway.post("/v1/responses?user_id=fk", {"input": "three", "previous_response_id": second["id"]}).ok()
    assert third["conversation"] == bare   # continued: the same conversation, in its form
    fork = gateway.post("/v1/responses?user_id=fk", {"input": "fork from two", "previous_response_id": second["id"]}).ok()
    forked = fork["conversation"]
    assert forked != bare and re.fullmatch(r"[0-9a-f]{48}", forked)
    got = gateway.get(f"/v1/conversations/{forked}?user_id=fk").ok()
    assert got["conversation_id"] == forked and len(got["chat_history"]) == 1
    assert gateway.get(f"/v1/conversations/{bare}?user_id=fk").ok()["conversation_id"] == bare
    assert gateway.get(f"/v1/responses/{fork['id']}?user_id=fk").ok()["conversation"] == forked
    status, frames = gateway.stream({"input": "fork again", "previous_response_id": second["id"]},
                                    path="/v1/responses?user_id=fk")
    [completed] = [data for _, data in frames if isinstance(data, dict) and data.get("type") == "response.completed"]
    assert status == 200 and re.fullmatch(r"[0-9a-f]{48}", completed["response"]["conversation"])
    # OpenAI's clients name it `conv_…` and keep getting that form, in forks too.
    named = gateway.post("/v1/responses?user_id=fk", {"input": "a", "conversation": f"conv_{bare}"}).ok()
    assert named["conversation"] == f"conv_{bare}"
    chained = gateway.post("/v1/responses?user_id=fk", {"input": "b", "previous_response_id": named["id"]}).ok()
    assert chained["conversation"] == f"conv_{bare}"
    openai_fork = gateway.post("/v1/responses?user_id=fk", {"input": "c", "previous_response_id": named["id"]}).ok()
    assert openai_fork["conversation"].startswith("conv_") and openai_fork["conversation"] != f"conv_{bare}"


@pytest.mark.parametrize("stream", [False, True])
def test_lcores_fork_scenario_naming_no_conversation(gateway_factory, upstream, stream):
    """LCORE's responses.feature fork scenario as its client runs it: no conversation
    named (the gateway answers `conv_…`, spec 001's form), a fork from the first turn,
    then `GET /v1/conversations/<the conversation it got>` compared byte for byte: the
    id comes back in the form the path named it in."""
    gateway = gateway_factory(upstream.url)

    def ask(body):
        if not stream:
            return gateway.post("/v1/responses?user_id=lf", body).ok()
        status, frames = gateway.stream(body, path="/v1/responses?user_id=lf")
        assert status == 200
        return [data for _, data in frames if isinstance(data, dict) and data.get("type") == "response.completed"][0][
            "response"]

    first = ask({"input": "Fork test turn one."})
    baseline = ask({"input": "Fork test turn two.", "previous_response_id": first["id"]})["conversation"]
    assert baseline == first["conversation"]
    forked = ask({"input": "Fork from middle using first response id.", "previous_response_id": first["id"]})[
        "conversation"]
    assert forked != baseline
    got = gateway.get(f"/v1/conversations/{forked}?user_id=lf").ok()
    assert got["conversation_id"] == forked and len(got["chat_history"]) == 1
    assert "Fork from middle" in json.dumps(got)
    got = gateway.get(f"/v1/conversations/{baseline}?user_id=lf").ok()
    assert got["conversation_id"] == baseline and len(got["chat_history"]) == 2
    # The bare form still gets LCORE's bare answer.
    assert gateway.get(f"/v1/conversations/{baseline[5:]}?user_id=lf").ok()["conversation_id"] == baseline[5:]
