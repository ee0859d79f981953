"""OpenAI's Conversations API through `gateway serve` with the `openai` SDK's own calls
(issue 23): create, retrieve, update, delete and the items (create, list, retrieve,
delete) in forward mode with the upstream's conversations and with the gateway's
(`llama_stack.conversations: gateway`), and over the local engine; another user's and
unknown ids; items added by hand sent as the next turn's input; one body for LCORE's
and OpenAI's clients on `GET`/`DELETE`, and LCORE's alone with `service.error_body: lcore`."""

from __future__ import annotations

import time
import warnings

import openai
import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_proc import start_upstream

KEYS = {"alice": "alice-key-0001", "bob": "bob-key-0001", "auditor": "auditor-key-0001"}
CHAT = ["responses", "list_conversations", "get_conversation", "update_conversation", "delete_conversation"]
ACCESS_RULES = [{"role": "chat", "actions": CHAT},
                {"role": "auditor", "actions": ["read_other_conversations", "query_other_conversations"]}]
AUTH = {"authentication": {"module": "api-key-token", "api_key_config": {"keys": [
    {"key": key, "user_id": user, "roles": ["chat", "auditor"] if user == "auditor" else ["chat"]}
    for user, key in KEYS.items()]}}, "authorization": {"access_rules": ACCESS_RULES}}
UNKNOWN = "conv_" + "0" * 48
USER_ITEM = {"type": "message", "role": "user", "content": "remember the word pineapple"}


@pytest.fixture(scope="module", params=["upstream", "gateway", "engine"])
def mode(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def gateway(mode, gateway_factory, upstream, chat_upstream):
    if mode == "engine":
        return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url), **AUTH)
    return gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "conversations": mode},
                           **AUTH)


def client(gateway, user: str = "alice") -> openai.OpenAI:
    return gateway.client(api_key=KEYS[user])


def test_create_retrieve_update_and_delete(gateway):
    alice = client(gateway)
    created = alice.conversations.create(metadata={"project": "apollo"})
    assert created.id.startswith("conv_") and len(created.id) == 53
    assert created.object == "conversation" and created.metadata == {"project": "apollo"}
    assert isinstance(created.created_at, int) and created.created_at > 0

    got = alice.conversations.retrieve(created.id)
    assert (got.id, got.object, got.created_at, got.metadata) == (created.id, "conversation", created.created_at,
                                                                   {"project": "apollo"})
    raw = gateway.get(f"/v1/conversations/{created.id}", headers={"Authorization": f"Bearer {KEYS['alice']}"}).ok()
    # One body for both audiences: an empty conversation made through the API is LCORE's 200 too.
    assert raw["conversation_id"] == created.id and raw["chat_history"] == []   # the form the path named

    updated = alice.conversations.update(created.id, metadata={"project": "gemini", "phase": "2"})
    assert updated.metadata == {"project": "gemini", "phase": "2"}
    assert alice.conversations.retrieve(created.id).metadata == {"project": "gemini", "phase": "2"}

    deleted = alice.conversations.delete(created.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (created.id, "conversation.deleted", True)
    extra = deleted.model_extra or {}
    assert extra["success"] is True and extra["response"] == "Conversation deleted successfully"
    with pytest.raises(openai.NotFoundError):
        alice.conversations.retrieve(created.id)
    # LCORE's status wins: deleting what is gone is 200 `deleted: false`.
    assert alice.conversations.delete(created.id).deleted is False


def test_items_create_list_retrieve_and_delete(gateway):
    alice = client(gateway)
    conversation = alice.conversations.create(items=[USER_ITEM])
    page = alice.conversations.items.list(conversation.id)
    assert [item.type for item in page.data] == ["message"]
    first = page.data[0]
    assert first.role == "user" and first.content[0].text == "remember the word pineapple"

    added = alice.conversations.items.create(conversation.id, items=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and the colour teal"}]}])
    assert len(added.data) == 1 and added.first_id == added.last_id == added.data[0].id
    newest_first = alice.conversations.items.list(conversation.id)
    assert [item.id for item in newest_first.data] == [added.data[0].id, first.id]
    oldest_first = alice.conversations.items.list(conversation.id, order="asc", limit=1)
    assert [item.id for item in oldest_first.data] == [first.id] and oldest_first.has_more is True
    after = alice.conversations.items.list(conversation.id, order="asc", after=first.id,
                                           include=["message.output_text.logprobs"])
    assert [item.id for item in after.data] == [added.data[0].id]

    one = alice.conversations.items.retrieve(added.data[0].id, conversation_id=conversation.id)
    assert one.id == added.data[0].id and one.content[0].text == "and the colour teal"
    answer = alice.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
    assert answer.id == conversation.id and answer.object == "conversation"
    assert [item.id for item in alice.conversations.items.list(conversation.id).data] == [first.id]
    with pytest.raises(openai.NotFoundError):
        alice.conversations.items.retrieve("msg_" + "1" * 48, conversation_id=conversation.id)


def test_items_are_the_next_turns_input(gateway, mode, upstream, chat_upstream):
    alice = client(gateway)
    conversation = alice.conversations.create(items=[USER_ITEM])
    alice.conversations.items.create(conversation.id, items=[
        {"type": "message", "role": "assistant", "content": "noted"}])
    served = chat_upstream if mode == "engine" else upstream
    served.clear()
    response = alice.responses.create(input="which word?", conversation=conversation.id)
    assert response.status == "completed"
    if mode == "engine":
        messages = served.last("/v1/chat/completions")["body"]["messages"]
        texts = [str(message.get("content")) for message in messages]
        assert any("pineapple" in text for text in texts) and any("noted" in text for text in texts)
        assert "which word?" in texts[-1]
    elif mode == "gateway":
        sent = served.last()["body"]
        assert "conversation" not in sent
        assert [item.get("role") for item in sent["input"]] == ["user", "assistant", "user"]
        assert "pineapple" in str(sent["input"][0]) and sent["input"][2]["content"] == "which word?"
    else:   # the turn names the upstream's conversation and sends them first, with their ids
        sent = served.last()["body"]
        assert sent["conversation"] == conversation.id
        listed = [item.id for item in alice.conversations.items.list(conversation.id, order="asc").data]
        assert [item.get("id") for item in sent["input"]] == [*listed[:2], None]
        assert "pineapple" in str(sent["input"][0]) and sent["input"][2]["content"] == "which word?"
    # Sent once: the next turn continues the chain without them again.
    served.clear()
    alice.responses.create(input="and now?", conversation=conversation.id)
    if mode == "gateway":
        sent = served.last()["body"]
        assert sent["previous_response_id"] == response.id and sent["input"] == "and now?"
    history = gateway.get(f"/v1/conversations/{conversation.id}",
                          headers={"Authorization": f"Bearer {KEYS['alice']}"}).ok()["chat_history"]
    assert [turn["messages"][0]["content"] for turn in history] == ["which word?", "and now?"]


def test_another_users_and_unknown_ids(gateway):
    alice, bob, auditor = client(gateway), client(gateway, "bob"), client(gateway, "auditor")
    mine = alice.conversations.create(items=[USER_ITEM], metadata={"k": "v"})
    item_id = alice.conversations.items.list(mine.id).data[0].id
    calls = [lambda c, cid: c.conversations.retrieve(cid),
             lambda c, cid: c.conversations.update(cid, metadata={"x": "y"}),
             lambda c, cid: c.conversations.items.list(cid),
             lambda c, cid: c.conversations.items.create(cid, items=[USER_ITEM]),
             lambda c, cid: c.conversations.items.retrieve(item_id, conversation_id=cid),
             lambda c, cid: c.conversations.items.delete(item_id, conversation_id=cid)]
    for call in calls:
        with pytest.raises(openai.PermissionDeniedError):
            call(bob, mine.id)
        with pytest.raises(openai.NotFoundError):
            call(bob, UNKNOWN)
    with pytest.raises(openai.PermissionDeniedError):
        bob.conversations.delete(mine.id)
    assert bob.conversations.delete(UNKNOWN).deleted is False
    with pytest.raises(openai.BadRequestError):
        bob.conversations.retrieve("conv_nothex")
    # `read_other_conversations` / `query_other_conversations` allow what LCORE's routes allow.
    assert auditor.conversations.retrieve(mine.id).metadata == {"k": "v"}
    assert [item.id for item in auditor.conversations.items.list(mine.id).data] == [item_id]
    assert alice.conversations.retrieve(mine.id).metadata == {"k": "v"}


def test_limits_are_422s(gateway):
    alice = client(gateway)
    for kwargs in ({"items": [USER_ITEM] * 21}, {"metadata": {f"k{i}": "v" for i in range(17)}},
                   {"metadata": {"k" * 65: "v"}}, {"metadata": {"k": "v" * 513}}):
        with pytest.raises(openai.UnprocessableEntityError):
            alice.conversations.create(**kwargs)
    conversation = alice.conversations.create()
    with pytest.raises(openai.UnprocessableEntityError):
        alice.conversations.items.create(conversation.id, items=[USER_ITEM] * 21)
    with pytest.raises(openai.UnprocessableEntityError):
        alice.conversations.items.create(conversation.id, items=[])
    for query in ("limit=0", "limit=101", "limit=x", "order=up"):
        reply = gateway.get(f"/v1/conversations/{conversation.id}/items?{query}",
                            headers={"Authorization": f"Bearer {KEYS['alice']}"})
        assert reply.status == 422, (query, reply.body)
    assert len(alice.conversations.items.list(conversation.id, limit=100).data) == 0


def test_no_serializer_warnings(gateway):
    alice = client(gateway)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conversation = alice.conversations.create(items=[USER_ITEM])
        conversation.model_dump()
        alice.conversations.retrieve(conversation.id).model_dump()
        alice.conversations.items.list(conversation.id).data[0].model_dump()
        alice.conversations.delete(conversation.id).model_dump()


def test_lcore_bodies_alone_with_error_body_lcore(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, service={"error_body": "lcore"}, **AUTH)
    headers = {"Authorization": f"Bearer {KEYS['alice']}"}
    first = gateway.post("/v1/responses", {"input": "hello"}, headers=headers).ok()
    cid = first["conversation"].removeprefix("conv_")
    got = gateway.get(f"/v1/conversations/{cid}", headers=headers).ok()
    assert set(got) == {"conversation_id", "chat_history"}
    deleted = gateway.delete(f"/v1/conversations/{cid}", headers=headers)
    assert deleted.body == (b'{"conversation_id":"' + cid.encode() + b'","deleted":true,'
                            b'"response":"Conversation deleted successfully","success":true}')
    # The OpenAI-only routes are there all the same.
    created = gateway.client(api_key=KEYS["alice"]).conversations.create()
    assert gateway.get(f"/v1/conversations/{created.id}", headers=headers).ok() == {
        "conversation_id": created.id, "chat_history": []}   # the form the path named it in


def conversations_shown(events) -> list:
    return [event.response.conversation for event in events if hasattr(event, "response")]


def test_conversation_in_the_form_the_client_sent(gateway):
    alice = client(gateway)
    conversation = alice.conversations.create()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the SDK's serializer warns on a string `conversation`
        first = alice.responses.create(input="hi", conversation={"id": conversation.id})
        assert first.conversation.id == conversation.id
        first.model_dump()
        events = list(alice.responses.create(input="again", conversation={"id": conversation.id}, stream=True))
        shown = conversations_shown(events)
        assert len(shown) >= 3 and all(c.id == conversation.id for c in shown)
        assert alice.responses.retrieve(first.id).conversation.id == conversation.id
        assert alice.responses.retrieve(events[-1].response.id).model_dump()["conversation"] == {"id": conversation.id}
    # The string form stays a string (spec 001), in JSON, stream and retrieval alike.
    as_string = alice.responses.with_raw_response.create(input="string", conversation=conversation.id).parse()
    raw = gateway.get(f"/v1/responses/{as_string.id}", headers={"Authorization": f"Bearer {KEYS['alice']}"}).ok()
    assert raw["conversation"] == conversation.id
    reply = gateway.post("/v1/responses", {"input": "s", "conversation": conversation.id, "stream": True},
                         headers={"Authorization": f"Bearer {KEYS['alice']}"})
    assert b'"conversation":"' + conversation.id.encode() + b'"' in reply.body
    assert b'"conversation":{' not in reply.body


def test_by_default_each_client_gets_the_form_it_expects(gateway):
    """No `service.conversation_form` (issue 46): an OpenAI SDK gets the object it types
    `conversation` as, with no warning, in JSON, streams, WebSocket turns and retrievals;
    a client that is no OpenAI SDK (LCORE's clients, curl) gets the string."""
    alice = client(gateway)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a string where the SDK expects an object warns on model_dump()
        first = alice.responses.create(input="new")
        assert first.conversation.id.startswith("conv_")
        first.model_dump()
        events = list(alice.responses.create(input="streamed", previous_response_id=first.id, stream=True))
        assert all(c.id == first.conversation.id for c in conversations_shown(events))
        assert alice.responses.retrieve(first.id).conversation.id == first.conversation.id
        with alice.responses.connect() as socket:
            socket.response.create(model=first.model, input="over a socket")
            done = next(event for event in socket if event.type == "response.completed")
        assert done.response.conversation.id.startswith("conv_")
        done.response.model_dump()
    auth = {"Authorization": f"Bearer {KEYS['alice']}"}
    plain = gateway.post("/v1/responses", {"input": "curl"}, headers=auth).ok()
    assert isinstance(plain["conversation"], str) and plain["conversation"].startswith("conv_")
    # Its user agent alone says so too (an SDK without the Stainless headers).
    agent = gateway.post("/v1/responses", {"input": "agent"}, headers={**auth, "User-Agent": "OpenAI/Python 2.9.0"}).ok()
    assert agent["conversation"] == {"id": agent["conversation"]["id"]}


@pytest.fixture(scope="module")
def string_form(gateway_factory, upstream):
    return gateway_factory(upstream.url, **AUTH, service={"conversation_form": "string"})


def test_the_operators_string_form_wins_over_the_sdks(string_form):
    raw = client(string_form).responses.with_raw_response.create(input="new")
    assert isinstance(raw.http_response.json()["conversation"], str)


@pytest.fixture(scope="module")
def object_form(mode, gateway_factory, upstream, chat_upstream):
    service = {"service": {"conversation_form": "object"}}
    if mode == "engine":
        return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url), **AUTH, **service)
    return gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "conversations": mode},
                           **AUTH, **service)


def test_the_operators_form_for_conversations_the_gateway_creates(object_form):
    alice = client(object_form)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = alice.responses.create(input="new")
        assert first.conversation.id.startswith("conv_")
        chained = alice.responses.create(input="chained", previous_response_id=first.id)
        assert chained.conversation.id == first.conversation.id
        events = list(alice.responses.create(input="streamed", previous_response_id=chained.id, stream=True))
        assert all(c.id == first.conversation.id for c in conversations_shown(events))
        assert alice.responses.retrieve(first.id).conversation.id == first.conversation.id
        background = alice.responses.create(input="later", previous_response_id=events[-1].response.id,
                                            background=True)
        assert background.conversation.id == first.conversation.id
        for _ in range(100):
            done = alice.responses.retrieve(background.id)
            if done.status not in ("queued", "in_progress"):
                break
            time.sleep(0.05)
        assert done.status == "completed" and done.conversation.id == first.conversation.id
    # A client that names it as a string still gets a string.
    raw = object_form.post("/v1/responses", {"input": "s", "conversation": first.conversation.id},
                           headers={"Authorization": f"Bearer {KEYS['alice']}"}).ok()
    assert raw["conversation"] == first.conversation.id


def test_a_conversation_the_gateway_keeps_holds_at_most_the_operators_items(gateway_factory, chat_upstream):
    gateway = gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url), **AUTH,
                              service={"max_conversation_items": 3})
    alice = client(gateway)
    conversation = alice.conversations.create(items=[USER_ITEM] * 2)
    with pytest.raises(openai.BadRequestError) as refused:
        alice.conversations.items.create(conversation.id, items=[USER_ITEM] * 2)
    assert "at most 3 items" in str(refused.value)
    assert len(alice.conversations.items.create(conversation.id, items=[USER_ITEM]).data) == 1
    with pytest.raises(openai.BadRequestError):
        alice.conversations.create(items=[USER_ITEM] * 4)


def test_a_failed_turn_gives_its_items_back(gateway, mode, upstream, chat_upstream):
    alice = client(gateway)
    conversation = alice.conversations.create(items=[USER_ITEM])
    with pytest.raises(openai.APIError):
        alice.responses.create(input="fail-upstream", conversation=conversation.id)
    served = chat_upstream if mode == "engine" else upstream
    served.clear()
    alice.responses.create(input="which word?", conversation=conversation.id)
    path = "/v1/chat/completions" if mode == "engine" else "/v1/responses"
    assert "pineapple" in str(served.last(path)["body"])


def test_an_upstream_conversation_id_of_no_accepted_form_is_a_502(gateway_factory, tmp_path):
    """The upstream's `POST /v1/conversations` answering an id that is neither
    `conv_<48 hex>` nor a UUID: the gateway cannot store or name it, so a new
    conversation (OpenAI's API, a turn, JSON or streamed) is a 502 in the envelope and
    nothing is kept (it was an assertion: a 500; a turn went on without its conversation)."""
    upstream = start_upstream(tmp_path)
    try:
        gateway = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0,
                                                             "conversations": "upstream"})
        upstream.post("/_scripted/conversation_ids", {"ids": ["conv_not-hex", "bad id", "conv_" + "g" * 48]}).ok()
        for path, body in (("/v1/conversations", {}), ("/v1/responses", {"input": "hi"}),
                           ("/v1/responses", {"input": "hi", "stream": True})):
            reply = gateway.post(f"{path}?user_id=u", body)
            assert reply.status == 502, (path, body, reply.status, reply.body)
            error = reply.json()["error"]
            assert (error["code"], error["type"]) == ("upstream_invalid_conversation_id", "server_error")
            assert reply.json()["detail"]["response"] == "Invalid upstream response"
        assert gateway.get("/v1/conversations?user_id=u").json()["conversations"] == []
        # The next id the upstream gives is a good one: the same requests succeed.
        assert gateway.post("/v1/conversations?user_id=u", {}).ok()["id"].startswith("conv_")
    finally:
        upstream.stop()
