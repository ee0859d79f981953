"""Bad input through `gateway serve` is a 4xx that creates nothing (issue 18): JSON nested
deeper than the gateway can re-encode is refused when the body is read, on every
endpoint that reads one; a `solr` value outside Latin-1 reaches the upstream escaped in
Llama Stack's provider-data header."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_quota_api import api, auth  # noqa: F401 (`api`: a gateway with the quota API and an admin)
from tests.support.gateway_db import Counts, GatewayDb

MAX_DEPTH = 200   # arrays and objects a body may nest (`schema/json_body.py`)
TOO_DEEP = [{"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error", "input": {},
             "ctx": {"error": f"nesting depth limit exceeded: arrays and objects may nest at most {MAX_DEPTH} "
                              "levels deep"}}]


def nested(depth: int, stream: bool = False) -> bytes:
    """A valid turn whose body nests `depth` levels: the object, `tools`, the tool, and
    the rest in the function's `parameters` (a JSON schema is any object)."""
    inner = depth - 3
    return (b'{"input":"deep","stream":' + (b"true" if stream else b"false")
            + b',"tools":[{"type":"function","name":"f","parameters":' + b'{"a":' * inner + b"1" + b"}" * inner
            + b"}]}")


def writes(upstream) -> list[dict]:
    return [request for request in upstream.requests() if request["method"] != "GET"]


def assert_nothing_created(gateway, upstream, user: str) -> None:
    assert writes(upstream) == []
    db = GatewayDb.of(gateway)
    db.flush()
    assert db.counts(user_id=user) == Counts(conversations=0, turns=0)


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                           "api": "chat_completions"})


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_at_the_depth_limit_is_served(gateway, upstream, stream):
    """The limit leaves room for what the gateway wraps around a client's values: the
    echoed tools in the response, in a stream event."""
    upstream.clear()
    reply = gateway.request("POST", "/v1/responses?user_id=deep-ok", raw=nested(MAX_DEPTH, stream))
    assert reply.status == 200, reply.body[:500]
    sent = upstream.last()["body"]
    assert sent["tools"][0]["parameters"] == json.loads(nested(MAX_DEPTH))["tools"][0]["parameters"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_body_at_the_depth_limit_is_served_by_the_engine(engine, chat_upstream, stream):
    """The local engine nests the tool one level deeper for Chat Completions."""
    chat_upstream.clear()
    reply = engine.request("POST", "/v1/responses?user_id=deep-ok", raw=nested(MAX_DEPTH, stream))
    assert reply.status == 200, reply.body[:500]
    sent = chat_upstream.last("/v1/chat/completions")["body"]
    assert sent["tools"][0]["function"]["parameters"] == json.loads(nested(MAX_DEPTH))["tools"][0]["parameters"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 255, 1024, 1025, 100_000])
def test_deeper_json_is_422_and_creates_nothing(gateway, upstream, depth, stream):
    upstream.clear()
    log_before = len(gateway.log())
    reply = gateway.request("POST", "/v1/responses?user_id=deep-json", raw=nested(depth, stream))
    assert reply.status == 422, reply.body[:500]
    body = reply.json()
    assert body["detail"] == TOO_DEEP
    assert body["error"]["code"] == "invalid_json" and body["error"]["type"] == "invalid_request_error"
    assert "Traceback" not in gateway.log()[log_before:]
    assert_nothing_created(gateway, upstream, "deep-json")


def test_deep_and_malformed_json_is_the_same_422(gateway, upstream):
    upstream.clear()
    # Not JSON for orjson before its depth limit, too deep for Python's `json` module
    # (which gives FastAPI's position for other errors).
    reply = gateway.request("POST", "/v1/responses?user_id=deep-json", raw=b"[" * 990 + b"x")
    assert reply.status == 422 and reply.json()["detail"] == TOO_DEEP
    assert_nothing_created(gateway, upstream, "deep-json")


@pytest.mark.parametrize("method, path", [("PUT", "/v1/quotas/users/alice"),
                                          ("POST", "/v1/quotas/cluster/increments")])
def test_deep_json_on_the_quota_api_is_the_same_422(api, method, path):  # noqa: F811
    before = api.get("/v1/quotas/users/alice", headers=auth("root")).ok()
    deep = b'{"limiters":' + b"[" * 300 + b"]" * 300 + b"}"
    reply = api.request(method, path, raw=deep, headers={**auth("root"), "Idempotency-Key": "deep"})
    assert reply.status == 422 and reply.json()["detail"] == TOO_DEEP
    assert api.get("/v1/quotas/users/alice", headers=auth("root")).ok() == before


SOLR = {"mode": "hybrid", "filters": {"fq": ["title:\u00e9t\u00e9 \u65e5\u672c \U0001F600", "line\nbreak \x7f\u2028",
                                             'quote " back \\ slash']}}


@pytest.mark.parametrize("stream", [False, True])
def test_solr_outside_latin1_reaches_the_upstream_escaped(gateway, upstream, stream):
    upstream.clear()
    reply = gateway.post("/v1/responses?user_id=solr-unicode", {"input": "solr please", "solr": SOLR,
                                                                "stream": stream})
    assert reply.status == 200, reply.body[:500]
    header = upstream.last()["headers"]["x-llamastack-provider-data"]
    # Printable ASCII only (no control character or DEL an HTTP parser refuses), and
    # Llama Stack, which parses it as JSON, gets the value exactly.
    assert all(" " <= char <= "~" for char in header), header
    assert json.loads(header) == {"solr": SOLR}
