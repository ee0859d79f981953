"""The gateway's own turn store (issue 22): every stored turn's content is written with
its row by the runner's settlement, whatever the endpoint (JSON, SSE, the legacy query
API) and whichever backend ran it; a `store: false` turn writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_db import GatewayDb


@pytest.fixture(params=["forward", "engine"])
def any_gateway(request, gateway_factory, upstream, chat_upstream):
    if request.param == "forward":
        return gateway_factory(upstream.url)
    return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url))


def content(db: GatewayDb, response_id: str) -> dict:
    return json.loads(db.wait_for_turn(response_id)["content"])


def test_every_endpoint_stores_what_the_turn_said(any_gateway):
    db = GatewayDb.of(any_gateway)
    first = any_gateway.post("/v1/responses?user_id=store", {"input": "hello there"}).ok()
    assert content(db, first["id"]) == {"q": "hello there", "a": first["output_text"]}

    status, frames = any_gateway.stream({"input": [{"role": "user", "content": "streamed question"}],
                                         "conversation": first["conversation"]}, path="/v1/responses?user_id=store")
    assert status == 200
    final = [data for _, data in frames if data != "[DONE]"][-1]["response"]
    stored = content(db, final["id"])
    assert stored["q"] == "streamed question" and stored["a"].startswith("Scripted reply (turn 2")

    query = any_gateway.post("/v1/query?user_id=store", {"query": "a legacy question"}).ok()
    rows = db._query("SELECT content FROM gateway_turns WHERE conversation_id = ?", (query["conversation_id"],))
    assert [json.loads(row["content"]) for row in rows] == [{"q": "a legacy question", "a": query["response"]}]


def test_a_turn_not_stored_writes_nothing(any_gateway):
    db = GatewayDb.of(any_gateway)
    reply = any_gateway.post("/v1/responses?user_id=nostore", {"input": "forget me", "store": False}).ok()
    db.flush()
    assert db.turn(reply["id"]) is None
