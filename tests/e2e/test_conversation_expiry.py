"""Conversation expiry through `gateway serve` (issue 22): off by default; with an idle
TTL an expired conversation answers as an unknown one at once, and the sweep deletes it
with its upstream state, exactly once with two replicas on one PostgreSQL."""

from __future__ import annotations

import time

from tests.support.gateway_db import GatewayDb


def wait_until(check, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_an_expired_conversation_is_unknown_before_the_sweep(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, conversation_cache={"type": "memory"},
                              conversation_expiry={"idle_ttl_seconds": 1, "sweep_interval_seconds": 3600})
    first = gateway.post("/v1/responses?user_id=x", {"input": "soon gone"}).ok()
    cid = first["conversation"].removeprefix("conv_")
    assert gateway.get(f"/v2/conversations/{cid}?user_id=x").status == 200
    time.sleep(1.2)
    for path in (f"/v1/conversations/{cid}", f"/v2/conversations/{cid}"):
        reply = gateway.get(f"{path}?user_id=x")
        assert reply.status == 404 and reply.json()["detail"]["response"] == "Conversation not found"
    assert gateway.get("/v1/conversations?user_id=x").ok() == {"conversations": []}
    reply = gateway.post("/v1/responses?user_id=x", {"input": "more", "conversation": first["conversation"]})
    assert reply.status == 404
    assert gateway.post("/v1/responses?user_id=x", {"input": "more", "previous_response_id": first["id"]}).status == 404
    assert GatewayDb.of(gateway).conversation(cid) is not None   # the sweep has not run yet


def test_off_by_default(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    first = gateway.post("/v1/responses?user_id=y", {"input": "kept"}).ok()
    time.sleep(1.2)
    assert gateway.get(f"/v1/conversations/{first['conversation']}?user_id=y").status == 200


def test_two_replicas_delete_once(gateway_factory, upstream, postgres):
    keys = postgres.new_database()
    settings = {"database": {"postgres": keys},
                "conversation_expiry": {"idle_ttl_seconds": 1, "sweep_interval_seconds": 0.2}}
    one, two = gateway_factory(upstream.url, **settings), gateway_factory(upstream.url, **settings)
    upstream.clear()
    made = [gateway.post("/v1/responses?user_id=z", {"input": f"expiring {index}"}).ok()
            for index, gateway in enumerate((one, two, one, two))]
    # A conversation kept busy outlives the others.
    busy = one.post("/v1/responses?user_id=z", {"input": "busy"}).ok()["conversation"]
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        two.post("/v1/responses?user_id=z", {"input": "still here", "conversation": busy}).ok()
        time.sleep(0.3)
    # Kept alive so far: not deleted; the others expired over a second ago.
    assert f"/v1/conversations/{busy}" not in [r["path"] for r in upstream.requests() if r["method"] == "DELETE"]
    assert two.get(f"/v1/conversations/{busy}?user_id=z").status == 200
    wait_until(lambda: all(one.get(f"/v1/conversations/{m['conversation']}?user_id=z").status == 404 for m in made))
    wait_until(lambda: len([r for r in upstream.requests() if r["method"] == "DELETE"
                            and r["path"].startswith("/v1/conversations/")]) >= len(made))
    time.sleep(1.0)   # time for a second deletion, were there one
    deletes = [r["path"] for r in upstream.requests() if r["method"] == "DELETE"]
    for created in made:
        assert deletes.count(f"/v1/conversations/{created['conversation']}") == 1, deletes
        assert deletes.count(f"/v1/responses/{created['id']}") == 1, deletes
    logs = one.log() + two.log()
    assert sum(logs.count(f"conversation {m['conversation'].removeprefix('conv_')} expired") for m in made) == 4
