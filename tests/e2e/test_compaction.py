"""`POST /v1/responses/compact` and `compaction` items through `gateway serve` (issue 27),
in forward mode (the scripted upstream's Responses API) and engine mode (its chat
completions), with the `openai` package's `client.responses.compact()`.

The scripted model's `scripted-recap` rule answers with every earlier user text, so the
configured compaction prompt makes the summary hold the window's facts, and a later
`scripted-recap` question shows what reached the model after the compacted window.

The public OpenResponses compliance suite's compaction tests could not be read here (the
stored versions of `src/lib/compliance-tests.ts` hold none): the three `test_compliance_*`
tests are derived from the specification's `/responses/compact` and its WebSocket
compaction rules instead (see docs/compaction.md)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai.types.responses.compacted_response import CompactedResponse

from gateway.schema.compaction_api import CompactedWindow

from tests.support.gateway_db import GatewayDb
from tests.support.gateway_proc import serving
from tests.support.raw_client import wait_until

MODEL = "scripted-chat"
PROMPT = "scripted-recap: summarize the conversation above."
K1 = {"id": "k1", "secret": "k1-secret-0123456789abcdefghijklmnopqrstuv"}
K2 = {"id": "k2", "secret": "k2-secret-0123456789abcdefghijklmnopqrstuv"}
INITIAL = 10**9
INTRO = "Summary of the earlier conversation (compacted):\n\n"


def _config(keys: list[dict], quota_dir, **extra):
    return {"response_compaction": {"keys": keys, "prompt": PROMPT, "max_input_bytes": 4096},
            "quota_handlers": {"sqlite": {"db_path": str(quota_dir / "quota.db")}, "limiters": [{"name": "daily", "type": "user_limiter", "initial_quota": INITIAL,
                                             "quota_increase": 0, "period": "1 day"}]}, **extra}


@pytest.fixture(scope="module")
def forward(gateway_factory, upstream, tmp_path_factory):
    # Everyone is an admin here, so a test can set a balance through the quota API; an
    # MCP server every turn gets (the upstream simulates it), but not the summary call.
    return gateway_factory(upstream.url, **_config([K1], tmp_path_factory.mktemp("quota")),
                           authorization={"access_rules": [{"role": "*", "actions": ["admin"]}]},
                           mcp_servers=[{"name": "docs", "url": "http://127.0.0.1:9/docs"}])


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, tmp_path_factory):
    return gateway_factory(chat_upstream.url, **_config(
        [K1], tmp_path_factory.mktemp("quota"), llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"}))


@pytest.fixture(params=["forward", "engine"])
def mode(request, forward, engine, upstream, chat_upstream):
    return (forward, upstream) if request.param == "forward" else (engine, chat_upstream)


def _client(gateway, user: str = "alice") -> openai.OpenAI:
    return gateway.client(default_query={"user_id": user})


def _window(compacted: CompactedResponse) -> list[dict]:
    """The output as the next request's input (the SDK types a user message as an output
    message, so pydantic warns about its `input_text` parts when dumping it)."""
    return [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]


def _user_texts(upstream, engine: bool) -> list[str]:
    """The user texts of the last model call the upstream received."""
    if engine:
        messages = upstream.last("/v1/chat/completions")["body"]["messages"]
        return [m["content"] if isinstance(m["content"], str) else " ".join(p.get("text", "") for p in m["content"])
                for m in messages if m["role"] == "user"]
    items = upstream.last()["body"]["input"]
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items
    return [i["content"] if isinstance(i["content"], str) else " ".join(p.get("text", "") for p in i["content"])
            for i in items if i.get("role") == "user"]


def test_compact_then_continue_from_the_compacted_window(mode):
    gateway, upstream = mode
    engine = "chat_completions" in gateway.config_path.read_text()
    client = _client(gateway)
    upstream.clear()
    first = client.responses.create(model=MODEL, input="My favourite colour is teal.")
    compacted = client.responses.compact(model=MODEL, previous_response_id=first.id,
                                         input=[{"role": "user", "content": "My name is Alice."}])
    assert compacted.object == "response.compaction" and compacted.id.startswith("resp_")
    *messages, item = compacted.output
    # The window's user messages: the chain's (one per turn), then the input's.
    assert [(m.type, m.role, m.content[0].text) for m in messages] == [
        ("message", "user", "My favourite colour is teal."), ("message", "user", "My name is Alice.")]
    assert item.type == "compaction" and item.id.startswith("cmp_")
    # Opaque: sealed with the configured key, none of the window's words readable.
    assert item.encrypted_content.startswith("gwc1.k1.")
    assert "teal" not in item.encrypted_content and "Alice" not in item.encrypted_content
    assert compacted.usage.total_tokens == compacted.usage.input_tokens + compacted.usage.output_tokens > 0
    # The summary call: the chain, the input, then the operator's prompt as the last user message.
    texts = _user_texts(upstream, engine)
    assert texts[-1] == PROMPT and "My name is Alice." in texts
    summary_call = upstream.last("/v1/chat/completions" if engine else "/v1/responses")["body"]
    assert not summary_call.get("tools")   # no tool offered to a summary
    if not engine:   # where every other turn gets the configured MCP server
        assert [tool["server_label"] for tool in upstream.requests("/v1/responses")[0]["body"]["tools"]] == ["docs"]
    if engine:   # the engine sends the chain's history itself; the upstream chains it by id
        assert "My favourite colour is teal." in texts
    else:
        sent = upstream.last()["body"]
        assert sent["previous_response_id"] == first.id and sent["store"] is False

    upstream.clear()
    later = client.responses.create(model=MODEL, input=[*_window(compacted),
                                                        {"role": "user", "content": "scripted-recap what I said"}])
    assert later.status == "completed" and later.previous_response_id is None
    # The model got the summary as a user message (never as instructions) and answers
    # with the earlier facts, though the new chain never sent the first turn.
    texts = _user_texts(upstream, engine)
    summaries = [text for text in texts if text.startswith(INTRO)]
    assert len(summaries) == 1 and "teal" in summaries[0] and "Alice" in summaries[0]
    assert "teal" in later.output_text and "Alice" in later.output_text
    sent = upstream.last("/v1/chat/completions" if engine else "/v1/responses")["body"]
    system = str(sent.get("instructions")) + str([m for m in sent.get("messages", []) if m["role"] == "system"])
    assert "teal" not in system
    # The stored question is the client's own words, not the decrypted summary.
    questions = [json.loads(row["content"])["q"] for row in GatewayDb.of(gateway)._query(
        "SELECT content FROM gateway_turns WHERE content IS NOT NULL")]
    assert "My favourite colour is teal. My name is Alice. scripted-recap what I said" in questions
    assert not [question for question in questions if INTRO.strip() in question]


def test_an_item_is_refused_when_tampered_foreign_or_of_an_unknown_key(forward, upstream):
    alice = _client(forward)
    compacted = alice.responses.compact(model=MODEL, input="The launch code is 1234.")
    item = _window(compacted)[-1]
    body = item["encrypted_content"]
    tampered = body[:-3] + ("A" if body[-3] != "A" else "B") + body[-2:]
    unknown = "gwc1.k9." + body.split(".", 2)[2]
    upstream.clear()
    cases = [("alice", {**item, "encrypted_content": tampered}, "altered, or made for another user"),
             ("bob", item, "altered, or made for another user"),
             ("alice", {**item, "encrypted_content": unknown}, "its key 'k9' is not configured"),
             ("alice", {**item, "encrypted_content": "gAAAAABpM0Yj-openai"}, "not made by this gateway")]
    for user, sent, reason in cases:
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            _client(forward, user).responses.create(model=MODEL, input=[sent, {"role": "user", "content": "hi"}])
        error = refused.value.body
        assert error["code"] == "invalid_compaction_item" and error["param"] == "input[0]", error
        assert reason in error["message"]
        assert refused.value.response.json()["detail"]["response"] == "Invalid compaction item"
    assert upstream.requests("/v1/responses") == []   # refused before anything reached the model
    # Another user's compact of alice's response: not found, like any of her responses.
    first = alice.responses.create(model=MODEL, input="private")
    with pytest.raises(openai.NotFoundError):
        _client(forward, "bob").responses.compact(model=MODEL, previous_response_id=first.id)


def test_a_rotated_key_still_opens_old_items(gateway_factory, forward, upstream, tmp_path):
    old = _window(_client(forward).responses.compact(model=MODEL, input="The meeting is on Friday."))
    rotated = gateway_factory(upstream.url, **_config([K2, K1], tmp_path))   # another replica, a newer key first
    client = _client(rotated)
    later = client.responses.create(model=MODEL, input=[*old, {"role": "user", "content": "scripted-recap"}])
    assert "Friday" in later.output_text
    newer = client.responses.compact(model=MODEL, input=old)
    assert newer.output[-1].encrypted_content.startswith("gwc1.k2.")   # the newest key seals
    # An old replica without the new key cannot open it: a 422, never a 500.
    reply = forward.post("/v1/responses?user_id=alice", {"model": MODEL, "input": _window(newer)})
    assert reply.status == 422 and reply.json()["error"]["code"] == "invalid_compaction_item"


@pytest.fixture(scope="module")
def forward_kept(gateway_factory, upstream, tmp_path_factory):
    """Forward mode with the conversations the gateway keeps (`conversations: gateway`)."""
    return gateway_factory(upstream.url, **_config([K1], tmp_path_factory.mktemp("quota"), llama_stack={
        "url": upstream.url, "max_retries": 0, "conversations": "gateway"}))


@pytest.fixture(params=["upstream", "gateway", "engine"])
def kept(request, forward, forward_kept, engine, upstream, chat_upstream):
    """Where a conversation's items live: the upstream's conversation, or the gateway's
    (forward mode, and the engine)."""
    return {"upstream": (forward, upstream), "gateway": (forward_kept, upstream),
            "engine": (engine, chat_upstream)}[request.param] + (request.param,)


def test_a_compaction_item_added_to_a_conversation(kept):
    """Through OpenAI's Conversations API: opened for the conversation's owner when added
    (422 for one that cannot be, nothing added), and given to the model as the summary
    on the conversation's next turn; the gateway keeps it sealed."""
    gateway, served, where = kept
    alice = _client(gateway)
    item = _window(alice.responses.compact(model=MODEL, input="My favourite colour is teal."))[-1]
    body = item["encrypted_content"]
    bobs = _window(_client(gateway, "bob").responses.compact(model=MODEL, input="Bob likes red."))[-1]
    conversation = alice.conversations.create()
    served.clear()
    cases = [({**item, "encrypted_content": body[:-2] + ("AA" if body[-2:] != "AA" else "BB")}, "altered"),
             (bobs, "altered, or made for another user"), ({**item, "encrypted_content": "gwc1.k9." + body[9:]},
                                                          "its key 'k9' is not configured"),
             ({"type": "compaction", "encrypted_content": "gAAAAABpM0Yj-openai"}, "not made by this gateway")]
    for sent, reason in cases:
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            alice.conversations.items.create(conversation.id, items=[{"role": "user", "content": "x"}, sent])
        error = refused.value.body
        assert (error["code"], error["param"]) == ("invalid_compaction_item", "items[1]") and reason in error["message"]
    with pytest.raises(openai.UnprocessableEntityError):   # refused before the conversation is made
        alice.conversations.create(items=[bobs])
    assert alice.conversations.items.list(conversation.id).data == []
    assert "compaction" not in json.dumps(served.requests())   # nothing reached the upstream

    added = alice.conversations.items.create(conversation.id, items=[item]).data
    # The gateway holds (and lists) it sealed until the next turn, wherever the conversation
    # lives: opaque to whoever reads the conversation.
    assert [(i.type, i.encrypted_content) for i in added] == [("compaction", body)]
    assert added[0].id.startswith("cmp_")
    listed = alice.conversations.items.list(conversation.id).data
    assert [(i.id, i.type) for i in listed] == [(added[0].id, "compaction")]
    rows = GatewayDb.of(gateway)._query("SELECT item FROM gateway_conversation_items")
    assert body in json.dumps(rows) and "teal" not in json.dumps(rows)
    assert "compaction" not in json.dumps(served.requests())   # nothing reached the upstream yet

    served.clear()
    later = alice.responses.create(model=MODEL, input="scripted-recap what I said", conversation=conversation.id)
    assert later.status == "completed" and "teal" in later.output_text
    assert '"compaction"' not in json.dumps(served.requests())   # the upstream never got the item
    summaries = [text for text in _user_texts(served, where == "engine") if text.startswith(INTRO)]
    assert len(summaries) == 1 and "teal" in summaries[0]
    history = gateway.get(f"/v1/conversations/{conversation.id}?user_id=alice").ok()["chat_history"]
    assert [turn["messages"][0]["content"] for turn in history] == ["scripted-recap what I said"]
    if where == "upstream":
        # The upstream's conversation keeps the summary as a user message, never the item.
        listed = alice.conversations.items.list(conversation.id, order="asc").data
        assert listed[0].type == "message" and listed[0].role == "user"
        assert listed[0].content[0].text.startswith(INTRO) and "teal" in listed[0].content[0].text
    else:
        # The item stays listed, sealed; the turn's stored question is the client's own.
        assert [i.type for i in alice.conversations.items.list(conversation.id).data] == ["compaction"]
    if where == "gateway":   # taken once: the next turn chains on without it
        served.clear()
        alice.responses.create(model=MODEL, input="and now?", conversation=conversation.id)
        assert served.last()["body"]["input"] == "and now?"


def _recalls(gateway, window: list[dict], fact: str) -> bool:
    later = _client(gateway).responses.create(model=MODEL, input=[*window, {"role": "user", "content": "scripted-recap"}])
    return fact in later.output_text


def test_on_by_default_with_a_key_generated_once_in_the_database(gateway_factory, upstream, tmp_path):
    """No `response_compaction.keys`: the gateway generates a key at its first start and
    keeps it in its database, so every worker on it (two processes, each asked on a
    connection of its own), a restart, and a gateway with keys configured later open its
    items. (Two replicas on one PostgreSQL agree the same way: tests/storage/test_generated_keys.py.)"""
    shared = {"database": {"sqlite": {"db_path": str(tmp_path / "shared.db")}}}
    group = gateway_factory(upstream.url, service={"workers": 2}, **shared)
    wait_until(lambda: len(serving(group)) == 2, "both workers serving", timeout=60)
    sealed = [_window(_client(group).responses.compact(model=MODEL, input=f"The boat is named Wren {n}."))
              for n in range(12)]   # a client each: new connections, spread over both workers
    assert {window[-1]["encrypted_content"].split(".")[1] for window in sealed} == {
        sealed[0][-1]["encrypted_content"].split(".")[1]}   # one key for the database
    assert sealed[0][-1]["encrypted_content"].startswith("gwc1.auto-")
    window = sealed[0]
    assert all(_recalls(group, window, "Wren") for _ in range(4))
    compacted_by = {json.loads(line).get("worker") for line in group.log().splitlines()
                    if '"type":"access"' in line and "/v1/responses/compact" in line}
    assert compacted_by == {0, 1}   # both workers sealed (1 in 2,048 runs sends all 12 to one)
    group.stop()
    restarted = gateway_factory(upstream.url, **shared)
    assert _recalls(restarted, window, "Wren")
    restarted.stop()
    # Keys configured later: the first one seals, the generated one still opens its items.
    configured = gateway_factory(upstream.url, response_compaction={"keys": [K1], "prompt": PROMPT}, **shared)
    assert _recalls(configured, window, "Wren")
    newer = _client(configured).responses.compact(model=MODEL, input=window)
    assert newer.output[-1].encrypted_content.startswith("gwc1.k1.")
    # Another database made its own key: its items do not open here (a 422, never a 500).
    elsewhere = gateway_factory(upstream.url)
    reply = elsewhere.post("/v1/responses?user_id=alice", {"model": MODEL, "input": window})
    assert reply.status == 422 and reply.json()["error"]["code"] == "invalid_compaction_item"
    assert "is not configured (it was rotated out)" in reply.json()["error"]["message"]


def test_a_foreign_item_added_to_a_conversation_is_refused_before_anything_is_added(gateway):
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gwc1.k1.AAAA"}
    reply = gateway.post("/v1/responses", {"input": [item]})
    assert reply.status == 422 and reply.json()["error"]["code"] == "invalid_compaction_item"
    conversation = gateway.post("/v1/conversations", {}).ok()["id"]
    reply = gateway.post(f"/v1/conversations/{conversation}/items", {"items": [item]})
    assert reply.status == 422 and reply.json()["error"]["code"] == "invalid_compaction_item"
    assert "its key 'k1' is not configured" in reply.json()["error"]["message"]
    assert gateway.get(f"/v1/conversations/{conversation}/items").ok()["data"] == []


def test_lcore_422_bodies_are_unchanged_beside_an_item(forward):
    item = _window(_client(forward).responses.compact(model=MODEL, input="context"))[-1]
    bad = {"model": MODEL, "temperature": "hot", "tool_choice": 7}
    with_item = forward.post("/v1/responses?user_id=alice", {**bad, "input": [item]})
    with_message = forward.post("/v1/responses?user_id=alice",
                                {**bad, "input": [{"type": "message", "role": "user", "content": "x"}]})
    assert with_item.status == with_message.status == 422
    assert with_item.json() == with_message.json()


def test_the_compaction_call_is_charged(forward):
    """Like any turn: what the summary call used comes off the caller's balance."""
    def balance() -> int:
        return forward.get("/v1/quotas?user_id=payer").ok()["available_quotas"]["daily"]

    client = _client(forward, "payer")
    client.responses.create(model=MODEL, input="warm up")
    before = balance()
    compacted = client.responses.compact(model=MODEL, input="Charge me for this summary.")
    assert before - balance() == compacted.usage.total_tokens > 0


def test_an_empty_balance_refuses_the_compaction_call(forward, upstream):
    forward.request("PUT", "/v1/quotas/users/broke?user_id=admin", {"limiters": {"daily": 0}}).ok()
    upstream.clear()
    with pytest.raises(openai.RateLimitError) as refused:
        _client(forward, "broke").responses.compact(model=MODEL, input="Summarize me for free.")
    assert refused.value.body["code"] == "insufficient_quota"
    assert upstream.requests("/v1/responses") == []


def test_bad_requests(forward):
    client = _client(forward)
    reply = forward.post("/v1/responses/compact?user_id=alice", {"input": "no model"})
    assert reply.status == 422 and reply.json()["detail"][0]["loc"] == ["body", "model"]
    reply = forward.post("/v1/responses/compact?user_id=alice", {"model": MODEL, "bogus": 1})
    assert reply.status == 422 and reply.json()["detail"][0]["type"] == "extra_forbidden"
    reply = forward.post("/v1/responses/compact?user_id=alice", {"model": MODEL})
    assert reply.status == 400 and reply.json()["error"]["param"] == "input"
    with pytest.raises(openai.APIStatusError) as too_big:
        client.responses.compact(model=MODEL, input="x" * 5000)
    assert too_big.value.status_code == 413
    assert too_big.value.body["code"] == "request_too_large"


# Ported compliance checks (derived from the specification; see the module docstring).

def test_compliance_compact_response(forward):
    """`compaction-compact`: a CompactResource: id, object, created_at, output ending in
    one compaction item after the user messages, usage."""
    reply = forward.post("/v1/responses/compact?user_id=alice", {
        "model": MODEL, "input": [{"type": "message", "role": "user", "content": "Create a landing page."},
                                  {"type": "message", "role": "assistant", "content": "Here it is."}]})
    data = reply.ok()
    assert set(data) == {"id", "object", "created_at", "output", "usage"}
    CompactedWindow.model_validate(data)   # the spec's CompactResource
    document = forward.get("/openapi.json").ok()   # and the gateway's own description of it
    jsonschema.validate(data, {"$ref": "#/components/schemas/CompactedWindow", "components": document["components"]},
                        cls=jsonschema.Draft202012Validator)
    assert data["object"] == "response.compaction" and isinstance(data["created_at"], int)
    assert [item["type"] for item in data["output"]] == ["message", "compaction"]
    assert data["output"][0]["role"] == "user" and data["output"][0]["content"] == [
        {"type": "input_text", "text": "Create a landing page."}]
    assert set(data["usage"]) >= {"input_tokens", "output_tokens", "total_tokens"}


def test_compliance_continue_from_compacted_window(forward):
    """`compaction-continue`: a new response (no previous_response_id) whose input is the
    compacted window plus a new user message completes (JSON and streamed)."""
    client = _client(forward)
    compacted = client.responses.compact(model=MODEL, input="Remember the number 42.")
    reply = forward.post("/v1/responses?user_id=alice", {"model": MODEL, "input": [
        *_window(compacted), {"type": "message", "role": "user", "content": "Now continue."}]})
    data = reply.ok()
    assert data["status"] == "completed" and data["output"]
    streamed = {"model": MODEL, "input": [*_window(compacted), {"role": "user", "content": "Streamed too."}]}
    status, frames = forward.stream(streamed, path="/v1/responses?user_id=alice")
    assert status == 200 and frames[-2][1]["type"] == "response.completed", frames[-3:]


def test_compliance_compact_previous_response(forward):
    """`compaction-previous-response`: compacting a stored chain by previous_response_id."""
    client = _client(forward)
    first = client.responses.create(model=MODEL, input="The capital is Paris.")
    second = client.responses.create(model=MODEL, input="It is in France.", previous_response_id=first.id)
    compacted = client.responses.compact(model=MODEL, previous_response_id=second.id)
    assert [(item.type, getattr(item, "role", None)) for item in compacted.output] == [
        ("message", "user"), ("message", "user"), ("compaction", None)]
    assert [item.content[0].text for item in compacted.output[:2]] == ["The capital is Paris.", "It is in France."]
    later = client.responses.create(model=MODEL, input=[*_window(compacted),
                                                        {"role": "user", "content": "scripted-recap"}])
    assert "Paris" in later.output_text


async def test_a_compaction_item_over_the_websocket(mode):
    """A `compaction` item in a WebSocket turn's input is opened as on HTTP (either mode):
    the summary reaches the model as a user message; another user's item is the same 422,
    as an error message on a connection that stays usable."""
    from tests.support.ws_client import connected, create, text_of
    gateway, upstream = mode
    compacted = _client(gateway).responses.compact(model=MODEL, input="The vault code is 7-7-3.")
    window = _window(compacted)
    async with connected(gateway, query="?user_id=alice") as socket:
        await socket.send(create("", input=[*window, {"role": "user", "content": "scripted-recap"}], model=MODEL))
        events = await socket.turn()
        assert events[-1]["type"] == "response.completed" and "7-7-3" in text_of(events)
        texts = _user_texts(upstream, "chat_completions" in gateway.config_path.read_text())
        summaries = [text for text in texts if text.startswith(INTRO)]
        assert len(summaries) == 1 and "7-7-3" in summaries[0] and texts[-1] == "scripted-recap"
    async with connected(gateway, query="?user_id=mallory") as socket:
        await socket.send(create("", input=[*window, {"role": "user", "content": "what was it?"}], model=MODEL))
        refused = await socket.next()
        assert refused["type"] == "error" and refused["status"] == 422
        assert refused["error"]["code"] == "invalid_compaction_item"
        await socket.send(create("still here?", model=MODEL))
        assert (await socket.turn())[-1]["type"] == "response.completed"
