"""LCORE's metrics on its query API through `gateway serve`, in both upstream modes
(lcore.md 7 and 9, fact 8): one `/v1/query` or `/v1/streaming_query` turn moves
`ls_llm_calls_total`, the token counters (by the usage the client was told),
`ls_llm_inference_duration_seconds`, `ls_rest_api_calls_total` and
`ls_response_duration_seconds` of its endpoint exactly once (a stream is one call,
where LCORE counts it twice; its topic summary is no call); requests refused with
422 / 403 / 404 / 429 are counted by status and move no LLM or token counter; the
interrupt route is labelled by its template, never by a request id."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.e2e.test_metrics import moved, no_ids_in_labels, scrape
from tests.support.engine_gateway import engine_config

QUERY, STREAM, INTERRUPT = "/v1/query", "/v1/streaming_query", "/v1/streaming_query/interrupt"
# Enough for a few small turns (each reserves ~1030 tokens), not for a 12 kB question.
LIMITS = [{"name": "daily", "type": "user_limiter", "initial_quota": 3000, "quota_increase": 0, "period": "1 day"}]


@pytest.fixture(scope="module", params=["forward", "engine"])
def gateway(request, gateway_factory, upstream, chat_upstream, tmp_path_factory):
    quota = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("query-metrics") / "q.db")}, "limiters": LIMITS}
    if request.param == "forward":
        return gateway_factory(upstream.url, quota_handlers=quota)
    return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url, quota_handlers=quota))


def frames(body: bytes) -> list[dict]:
    return [json.loads(block[6:]) for block in body.decode().split("\n\n") if block]


def _turn_moved(before, after, endpoint: str, sent: int, received: int) -> None:
    """What one successful turn of `endpoint` moves, exactly."""
    assert moved(before, after, "ls_llm_calls_total", endpoint=endpoint) == 1
    assert moved(before, after, "ls_llm_calls_failures_total", endpoint=endpoint) == 0
    assert moved(before, after, "ls_llm_token_sent_total", endpoint=endpoint) == sent > 0
    assert moved(before, after, "ls_llm_token_received_total", endpoint=endpoint) == received > 0
    assert moved(before, after, "ls_llm_inference_duration_seconds_count", endpoint=endpoint, result="success") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path=endpoint, status_code="200") == 1
    assert moved(before, after, "ls_response_duration_seconds_count", path=endpoint) == 1


def test_a_query_turn_moves_each_metric_once(gateway):
    before = scrape(gateway)
    body = gateway.post(f"{QUERY}?user_id=counted", {"query": "hello there, say hi"}).ok()   # a new conversation
    after = scrape(gateway)
    _turn_moved(before, after, QUERY, body["input_tokens"], body["output_tokens"])
    assert moved(before, after, "ls_llm_calls_total") == 1            # its topic summary is not a call
    assert moved(before, after, "ls_quota_checks_total", endpoint=QUERY, result="allowed") == 1
    no_ids_in_labels(after)


def test_a_streaming_query_turn_moves_each_metric_once(gateway):
    before = scrape(gateway)
    reply = gateway.post(f"{STREAM}?user_id=counted", {"query": "hello there, say hi"})
    assert reply.status == 200, reply.body
    end = frames(reply.body)[-1]
    assert end["event"] == "end"
    after = scrape(gateway)
    _turn_moved(before, after, STREAM, end["data"]["input_tokens"], end["data"]["output_tokens"])
    assert moved(before, after, "ls_llm_calls_total") == 1            # not twice, as LCORE counts a stream
    assert moved(before, after, "gateway_turns_total", mode="stream", outcome="completed") == 1
    no_ids_in_labels(after)


def test_refused_requests_are_counted_by_status_and_move_no_llm_counter(gateway):
    mine = gateway.post(f"{QUERY}?user_id=owner", {"query": "mine", "generate_topic_summary": False}).ok()
    before = scrape(gateway)
    for path in (QUERY, STREAM):
        assert gateway.post(f"{path}?user_id=refused", {"no_tools": True}).status == 422           # no query
        assert gateway.post(f"{path}?user_id=refused", {"query": "theirs", "conversation_id":
                                                        mine["conversation_id"]}).status == 403
        assert gateway.post(f"{path}?user_id=refused", {"query": "hi", "conversation_id":
                                                        "0" * 48}).status == 404
        assert gateway.post(f"{path}?user_id=refused", {"query": "x" * 12000}).status == 429
    after = scrape(gateway)
    for name in ("ls_llm_calls_total", "ls_llm_calls_failures_total", "ls_llm_token_sent_total",
                 "ls_llm_token_received_total", "ls_llm_inference_duration_seconds_count", "gateway_turns_total"):
        assert moved(before, after, name) == 0, name
    for path in (QUERY, STREAM):
        for status in ("422", "403", "404", "429"):
            assert moved(before, after, "ls_rest_api_calls_total", path=path, status_code=status) == 1, (path, status)
        assert moved(before, after, "ls_rest_api_calls_total", path=path, status_code="200") == 0
        assert moved(before, after, "ls_response_duration_seconds_count", path=path) == 4
        assert moved(before, after, "ls_quota_checks_total", endpoint=path, result="exceeded") == 1


def test_the_interrupt_route_is_labelled_by_its_template(gateway):
    reply = gateway.post(f"{STREAM}?user_id=stopper", {"query": "hi", "no_tools": True})
    request_id = frames(reply.body)[0]["data"]["request_id"]
    before = scrape(gateway)
    finished = gateway.post(f"{INTERRUPT}?user_id=stopper", {"request_id": request_id}).ok()   # already finished
    assert finished["interrupted"] is False
    assert gateway.post(f"{INTERRUPT}?user_id=stopper", {"request_id": str(uuid.uuid4())}).status == 404
    assert gateway.post(f"{INTERRUPT}?user_id=stopper", {"request_id": "not-an-id"}).status == 422
    assert gateway.post(f"{INTERRUPT}?user_id=mallory", {"request_id": request_id}).status == 403
    after = scrape(gateway)
    for status in ("200", "404", "422", "403"):
        assert moved(before, after, "ls_rest_api_calls_total", path=INTERRUPT, status_code=status) == 1, status
    assert moved(before, after, "ls_response_duration_seconds_count", path=INTERRUPT) == 4
    assert moved(before, after, "ls_llm_calls_total") == 0
    labels = {value for (_, key), _ in after.items() for _, value in key}
    assert not any(request_id in value or "not-an-id" in value for value in labels)
    no_ids_in_labels(after)
