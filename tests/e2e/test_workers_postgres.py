"""`service.workers: 2` on PostgreSQL, through `gateway serve` (issue 43): the workers
behave as replicas on one database do. A conversation continued on either worker, the
quota tests' invariant (50 concurrent turns against room for 10) with the turns spread
over both, an interrupt and a background cancel reaching the worker that runs the turn.
The process side (two pids, a killed worker replaced, the drain) is test_workers.py's."""

from __future__ import annotations

import pytest

from tests.e2e import test_workers
from tests.e2e.test_workers import (a_restart_leaves_the_other_workers_run_alone, cancel_reaches_the_other_worker,
                                    fifty_against_room_for_ten,
                                    interrupt_reaches_the_other_worker, one_on_each, started_with_quota)
from tests.support.raw_client import wait_until

workers = test_workers.workers   # the fixture


@pytest.fixture
def pg(postgres):
    return {"postgres": postgres.new_database(namespace="lightspeed-stack")}


def test_a_conversation_continues_across_workers_on_postgres(workers, pg):
    gateway = workers(database=pg)
    first, second = one_on_each(gateway)
    previous = first.request("POST", "/v1/responses?user_id=cara", {"input": "turn 1"}).ok()
    for turn in range(2, 7):
        on = second if turn % 2 == 0 else first
        reply = on.request("POST", "/v1/responses?user_id=cara",
                           {"input": f"turn {turn}", "previous_response_id": previous["id"]}).ok()
        assert reply["conversation"] == previous["conversation"]
        assert reply["output_text"].startswith(f"Scripted reply (turn {turn},"), reply["output_text"]
        previous = reply
    first.close()
    second.close()


def test_the_quota_invariant_across_workers_on_postgres(workers, upstream, tmp_path, postgres):
    fifty_against_room_for_ten(started_with_quota(workers, upstream, tmp_path, postgres), "eve")


def test_an_interrupt_reaches_the_other_worker_on_postgres(workers, upstream_with, pg):
    interrupt_reaches_the_other_worker(workers(upstream_with("--delay-ms", "150"), database=pg))


def test_a_background_cancel_reaches_the_other_worker_on_postgres(workers, upstream, pg):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    cancel_reaches_the_other_worker(workers(upstream, database=pg), upstream)


def test_a_restarted_worker_leaves_the_other_workers_background_run_alone_on_postgres(workers, pg):
    a_restart_leaves_the_other_workers_run_alone(workers(database=pg))
