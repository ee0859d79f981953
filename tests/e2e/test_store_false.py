"""`store: false`: a turn that stores nothing anywhere. No upstream conversation is
created, `store: false` is forwarded, no turn is recorded; the response names the
conversation whose history it was answered from, or null; it cannot be continued."""

from __future__ import annotations

import pytest

from tests.support.flows import checked
from tests.support.gateway_db import Counts, GatewayDb


@pytest.fixture(scope="module")
def forgetful(gateway_factory, upstream):
    return gateway_factory(upstream.url)


def test_nothing_is_created_or_recorded(forgetful, upstream):
    before = GatewayDb.of(forgetful).counts()
    upstream.clear()
    reply = forgetful.post("/v1/responses", {"input": "off the record", "store": False})
    assert reply.status == 200, reply.body
    response = reply.json()
    assert response["conversation"] is None and response["store"] is False
    assert upstream.requests("/v1/conversations") == [], "no upstream conversation for a store: false turn"
    sent = upstream.last()["body"]
    assert sent["store"] is False and "conversation" not in sent and "previous_response_id" not in sent
    # Nothing recorded: after a stored turn whose record has landed (reading it waits
    # for its record), exactly that turn and its conversation are new.
    stored = forgetful.post("/v1/responses", {"input": "on the record"}).json()
    assert forgetful.get(f"/v1/responses/{stored['id']}").status == 200
    assert GatewayDb.of(forgetful).counts() == Counts(conversations=before.conversations + 1,
                                                      turns=before.turns + 1)
    # Like OpenAI: what was not stored cannot be read or continued.
    assert forgetful.get(f"/v1/responses/{response['id']}").status == 404
    reply = forgetful.post("/v1/responses", {"input": "and then?", "previous_response_id": response["id"]})
    assert reply.status == 404 and reply.json()["error"]["code"] == "response_not_found"


def test_in_a_conversation_it_reads_the_history_and_adds_nothing(forgetful, upstream):
    first = forgetful.post("/v1/responses", {"input": "Remember the word teal"}).json()
    conversation = first["conversation"]
    upstream.clear()
    reply = forgetful.post("/v1/responses", {"input": "what was the word?", "store": False,
                                             "conversation": conversation})
    assert reply.status == 200, reply.body
    aside = reply.json()
    assert aside["conversation"] == conversation
    assert aside["output_text"].startswith("Scripted reply (turn 2, 3 messages)"), "the history was read"
    sent = upstream.last()["body"]
    # Chained, not sent with `conversation`: the upstream adds nothing to it.
    assert sent["previous_response_id"] == first["id"] and "conversation" not in sent and sent["store"] is False
    assert upstream.requests("/v1/conversations") == []
    # The conversation goes on from its last stored turn, as if the aside never happened.
    upstream.clear()
    after = forgetful.post("/v1/responses", {"input": "and now?", "conversation": conversation}).json()
    assert after["output_text"].startswith("Scripted reply (turn 2, 3 messages)")
    assert forgetful.get(f"/v1/responses/{aside['id']}").status == 404
    assert forgetful.get(f"/v1/responses/{after['id']}").status == 200


def test_stream_names_no_conversation(forgetful):
    status, frames = forgetful.stream({"input": "stream off the record", "store": False})
    events = checked(frames)
    assert status == 200
    assert {event["response"]["conversation"] for event in events if "response" in event} == {None}
    assert events[-1]["response"]["store"] is False
