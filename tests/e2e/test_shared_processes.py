"""Two `gateway serve` processes on one database, as `service.workers: 2` runs them
(each told it is a worker: `GATEWAY_WORKERS=2`), on one SQLite file and on one
PostgreSQL: what one process kept to itself holds across both. The per-user cap of
running responses counts both processes' turns, an interrupt and a background cancel
sent to one reach the turn the other runs, a conversation goes on from either; a
second process that is not a worker is refused the SQLite file at start. (The quota
invariants across two processes: tests/e2e/test_quota_invariant.py.)"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.test_background import VERY_SLOW, _wait_for
from tests.e2e.test_interrupt import Stream, interrupt
from tests.support.flows import checked
from tests.support.gateway_proc import parse_sse
from tests.support.raw_client import wait_until

WORKERS = {"GATEWAY_WORKERS": "2"}
CAP = 2


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def pair(request, upstream_with, gateway_factory, tmp_path_factory):
    """(first, second, upstream): two workers on one database, in front of an upstream
    that waits 150 ms between stream events."""
    upstream = upstream_with("--delay-ms", "150")
    if request.param == "postgres":
        database = {"postgres": request.getfixturevalue("postgres").new_database(namespace="lightspeed-stack")}
    else:
        database = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("shared") / "gateway.db")}}
    service = {"max_responses_in_progress_per_user": CAP}
    first = gateway_factory(upstream.url, WORKERS, database=database, service=service)
    second = gateway_factory(upstream.url, WORKERS, database=database, service=service)
    return first, second, upstream


def test_the_per_user_cap_counts_both_processes(pair):
    first, second, upstream = pair
    slow = {"input": "hi", "tool_choice": "none", "metadata": {"scripted_delay_ms": "1500"}}
    with ThreadPoolExecutor(CAP) as pool:
        running = [pool.submit(first.post, "/v1/responses?user_id=capped", slow, timeout=60) for _ in range(CAP)]
        wait_until(lambda: sum(r["body"].get("metadata") == slow["metadata"] for r in upstream.requests("/v1/responses"))
                   >= CAP, "both turns sent upstream", timeout=10)
        refused = second.post("/v1/responses?user_id=capped", {"input": "hi"})
        assert refused.status == 429, refused.body
        assert refused.json()["detail"]["cause"] == f"User capped has {CAP} responses in progress (limit {CAP})"
        assert refused.headers["retry-after"] == "1"
        assert second.post("/v1/responses?user_id=other", {"input": "hi"}).status == 200   # another user
        assert all(future.result().status == 200 for future in running)
    # The first process gives its places back within a second of its turns' end.
    wait_until(lambda: second.post("/v1/responses?user_id=capped", {"input": "hi"}).status == 200,
               "a place on the second process", timeout=10)
    upstream.clear()


def test_an_interrupt_reaches_the_process_that_runs_the_stream(pair):
    runner, other, upstream = pair
    stream = Stream(runner, {"query": "tell me a long story", "no_tools": True}, "pat")
    request_id = stream.next_event()["data"]["request_id"]
    assert stream.next_event()["event"] == "token"
    assert interrupt(other, request_id, "mallory").status == 403
    stopped = interrupt(other, request_id, "pat")
    assert stopped.ok() == {"request_id": request_id, "interrupted": True, "message": "Streaming request interrupted"}
    rest = stream.rest()
    assert [event["event"] for event in rest][-1] == "interrupted"
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
    assert interrupt(other, request_id, "pat").ok() == {
        "request_id": request_id, "interrupted": False,
        "message": "Streaming request already completed; nothing to interrupt"}
    assert interrupt(other, str(uuid.uuid4()), "pat").status == 404   # no process has it


def test_a_background_cancel_reaches_the_process_that_runs_it(pair):
    runner, other, upstream = pair
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    user = "?user_id=bg-shared"
    body = runner.post(f"/v1/responses{user}", {"input": "long", "background": True, "metadata": VERY_SLOW}).ok()
    _wait_for(other, body["id"], "bg-shared", done=lambda r: r["output_text"] != "")
    started = time.monotonic()
    cancelled = other.post(f"/v1/responses/{body['id']}/cancel{user}").ok()
    assert cancelled["status"] == "cancelled" and cancelled["output_text"]
    assert time.monotonic() - started < 5
    wait_until(lambda: upstream.open_streams() == 0, "the runner to close the upstream call")
    events = checked(parse_sse(runner.get(f"/v1/responses/{body['id']}{user}&stream=true").body))
    assert events[-1]["type"] == "response.incomplete" and events[-1]["response"]["status"] == "cancelled"


def test_a_conversation_goes_on_from_either_process(pair):
    first, second, _ = pair
    one = first.post("/v1/responses?user_id=talker", {"input": "one", "store": True}).ok()
    two = second.post("/v1/responses?user_id=talker", {"input": "two", "previous_response_id": one["id"]}).ok()
    three = first.post("/v1/responses?user_id=talker", {"input": "three", "previous_response_id": two["id"]}).ok()
    assert three["output_text"].startswith("Scripted reply (turn 3"), three["output_text"]


def test_a_second_process_alone_is_refused_the_sqlite_file(gateway_factory, upstream, tmp_path):
    database = {"sqlite": {"db_path": str(tmp_path / "gateway.db")}}
    alone = gateway_factory(upstream.url, database=database)
    with pytest.raises(RuntimeError) as refused:
        gateway_factory(upstream.url, database=database)
    assert f"error: database.sqlite_path {tmp_path / 'gateway.db'} is in use by another gateway process" \
        in str(refused.value)
    with pytest.raises(RuntimeError) as worker:
        gateway_factory(upstream.url, WORKERS, database=database)
    assert "is in use by a gateway process that is not one of its workers" in str(worker.value)
    assert alone.get("/liveness").status == 200
