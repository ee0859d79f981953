"""Background responses on PostgreSQL, in both modes, two replicas on one database:
a response run by one replica is read, followed from a sequence number and cancelled
through the other; a replica that dies leaves its response to be failed by a live one."""

from __future__ import annotations

import signal

import pytest

from tests.e2e.test_background import SLOW, VERY_SLOW, _engine_keys, _wait_for
from tests.support.flows import checked
from tests.support.gateway_proc import parse_sse
from tests.support.openai_shapes import validate_response
from tests.support.raw_client import wait_until


@pytest.fixture(scope="module", params=["forward", "engine"])
def replicas(request, gateway_factory, upstream, chat_upstream, postgres):
    keys = postgres.new_database(namespace="lightspeed-stack")
    target = upstream if request.param == "forward" else chat_upstream
    extra = {} if request.param == "forward" else _engine_keys(target.url)
    first = gateway_factory(target.url, database={"postgres": keys}, **extra)
    second = gateway_factory(target.url, database={"postgres": keys}, **extra)
    return first, second, target


def test_another_replica_reads_follows_and_continues_it(replicas):
    runner, other, _ = replicas
    user = "?user_id=bg-pg"
    body = runner.post(f"/v1/responses{user}", {"input": "run on one", "background": True, "metadata": SLOW}).ok()
    during = other.get(f"/v1/responses/{body['id']}{user}").ok()
    assert during["status"] == "in_progress" and during["background"] is True
    # Followed from the other replica, after event 1: polled from the table to the end.
    resumed = list(other.client().responses.retrieve(body["id"], stream=True, starting_after=1,
                                                     extra_query={"user_id": "bg-pg"}))
    assert [event.sequence_number for event in resumed] == list(range(2, 2 + len(resumed)))
    assert resumed[-1].type == "response.completed"
    final = other.get(f"/v1/responses/{body['id']}{user}").ok()
    assert final["status"] == "completed" and final["output_text"] == resumed[-1].response.output_text
    validate_response({k: v for k, v in final.items() if k != "available_quotas"})
    events = checked(parse_sse(other.get(f"/v1/responses/{body['id']}{user}&stream=true").body))
    assert [(e["sequence_number"], e["type"]) for e in events[2:]] == [(e.sequence_number, e.type) for e in resumed]
    # Recorded before the end was shown: the other replica continues the conversation.
    second = other.post(f"/v1/responses{user}", {"input": "next", "conversation": body["conversation"]}).ok()
    assert second["output_text"].startswith("Scripted reply (turn 2, 3 messages)")


def test_a_cancel_on_another_replica_stops_the_run(replicas):
    runner, other, target = replicas
    wait_until(lambda: target.open_streams() == 0, "earlier upstream streams to end")
    user = "?user_id=bg-pg-cancel"
    body = runner.post(f"/v1/responses{user}", {"input": "long", "background": True, "metadata": VERY_SLOW}).ok()
    _wait_for(other, body["id"], "bg-pg-cancel", done=lambda r: r["output_text"] != "")
    cancelled = other.post(f"/v1/responses/{body['id']}/cancel{user}").ok()
    assert cancelled["status"] == "cancelled" and cancelled["output_text"]
    wait_until(lambda: target.open_streams() == 0, "the runner to close the upstream call")
    assert runner.get(f"/v1/responses/{body['id']}{user}").ok()["status"] == "cancelled"
    events = checked(parse_sse(runner.get(f"/v1/responses/{body['id']}{user}&stream=true").body))
    assert events[-1]["type"] == "response.incomplete" and events[-1]["response"]["status"] == "cancelled"
    assert other.post(f"/v1/responses/{body['id']}/cancel?user_id=mallory").status == 404


def test_a_lost_replicas_response_is_failed_by_a_live_one(gateway_factory, upstream, postgres):
    """The runner dies (SIGKILL: no clean shutdown); a live replica finds its response
    by its stale heartbeat (30 s; it looks every 10 s) and fails it, and a client
    following it there gets the end."""
    keys = postgres.new_database(namespace="lightspeed-stack")
    runner = gateway_factory(upstream.url, database={"postgres": keys})
    live = gateway_factory(upstream.url, database={"postgres": keys})
    user = "?user_id=bg-pg-lost"
    body = runner.post(f"/v1/responses{user}", {"input": "lost", "background": True, "metadata": VERY_SLOW}).ok()
    _wait_for(live, body["id"], "bg-pg-lost", done=lambda r: r["output_text"] != "")
    runner.proc.popen.send_signal(signal.SIGKILL)
    runner.proc.popen.wait(10)
    events = list(live.client(timeout=90).responses.retrieve(body["id"], stream=True, starting_after=0,
                                                             extra_query={"user_id": "bg-pg-lost"}))
    assert events[-1].type == "response.failed" and events[-1].response.status == "failed"
    assert "stopped before this background response was done" in events[-1].response.error.message
    assert live.get(f"/v1/responses/{body['id']}{user}").ok()["status"] == "failed"
    assert "marked failed" in live.log()
