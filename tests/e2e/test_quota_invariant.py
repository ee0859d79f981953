"""Quotas that hold against a hostile caller (issue 19), through `gateway serve`: each
reproduction of the issue (a tool loop past its balance, loop limits a client raises, an
abandoned or cancelled engine loop charged only its estimate, forks whose context the
estimate ignored, one user holding every connection) and the invariant under a mixed
concurrent workload on one balance, on SQLite and on PostgreSQL with two replicas."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway.config import DEFAULT_USER_ID
from tests.support.flows import checked
from tests.support.mcp_server import running_mcp_server
from tests.support.raw_client import open_stream, read_until, reset, wait_until

DAILY = {"name": "daily", "type": "user_limiter", "initial_quota": 10000, "quota_increase": 0, "period": "1 day"}
LOOP = {"input": "loop-tools use the echo tool", "tools": [{"type": "mcp", "server_label": "tools"}],
        "max_output_tokens": 50, "max_infer_iters": 40}


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-quota")


@pytest.fixture
def start(gateway_factory, upstream, chat_upstream, mcp, tmp_path, request):
    """A gateway (or several, on one PostgreSQL database) with a daily user limiter."""

    def launch(mode: str = "engine", engine: str = "sqlite", initial: int = 10000, replicas: int = 1, **extra):
        if engine == "postgres":
            storage = {"postgres": request.getfixturevalue("postgres").new_database()}
        else:
            storage = {"sqlite": {"db_path": str(tmp_path / f"gateway-{time.monotonic_ns()}.db")}}
        launch.storage = storage
        target = upstream if mode == "forward" else chat_upstream
        llama_stack = {"url": target.url, "max_retries": 0} | ({"api": "chat_completions"} if mode == "engine" else {})
        # Two processes on one SQLite file are workers (`storage/sharing.py`), as the
        # supervisor of `service.workers` starts them.
        env = {"GATEWAY_WORKERS": str(replicas)} if engine == "sqlite" and replicas > 1 else None
        return [gateway_factory(target.url, env, database=storage, llama_stack=llama_stack,
                                mcp_servers=[{"name": "tools", "url": mcp.url}],
                                quota_handlers={**storage, "limiters": [{**DAILY, "initial_quota": initial}]}, **extra)
                for _ in range(replicas)]
    return launch


def balance(gateway, user: str = DEFAULT_USER_ID) -> int:
    return gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def used(response: dict) -> int:
    usage = response.get("usage") or {}
    return usage.get("input_tokens", 0) + usage.get("output_tokens", 0)


def calls(response: dict) -> int:
    return sum(1 for item in response["output"] if item["type"] == "mcp_call")


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_tool_loop_is_readmitted_every_round_and_ends_incomplete(start, engine):
    """Reproduction: one admission paid for 40 rounds of a re-sent context (balance
    1,970 → −38,430). Each round after the first is reserved first; refused, the
    response ends `incomplete` (reason null) charged what the upstream reported."""
    gateway, = start(engine=engine, initial=3000)
    response = gateway.post("/v1/responses", LOOP).ok()
    assert response["status"] == "incomplete" and response["incomplete_details"] is None
    assert 1 < calls(response) < 40
    assert response["available_quotas"] == {"daily": 3000 - used(response)}
    assert balance(gateway) == 3000 - used(response) >= 0


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_a_clients_loop_limits_are_capped_by_the_operators(start, upstream, chat_upstream, mode):
    """Reproduction: a request's max_infer_iters / max_tool_calls replaced the operator's
    (40 rounds against 3). LCORE's keys stay the defaults; the new limits cap what a
    client asks, and the response echoes the value applied."""
    gateway, = start(mode, initial=10 ** 9, inference={"max_infer_iters": 2, "max_tool_calls": 3,
                                                        "max_infer_iters_limit": 3, "max_tool_calls_limit": 4})
    target = upstream if mode == "forward" else chat_upstream
    target.clear()
    asked = {**LOOP, "max_infer_iters": 40, "max_tool_calls": 100}
    response = gateway.post("/v1/responses", asked if mode == "engine" else {**asked, "tools": []}).ok()
    assert response["max_tool_calls"] == 4
    if mode == "forward":
        sent = target.requests("/v1/responses")[-1]["body"]
        assert (sent["max_infer_iters"], sent["max_tool_calls"]) == (3, 4)
        defaults = gateway.post("/v1/responses", {"input": "hi"}).ok()
        sent = target.requests("/v1/responses")[-1]["body"]
        assert (sent["max_infer_iters"], sent["max_tool_calls"], defaults["max_tool_calls"]) == (2, 3, 3)
    else:
        assert len(target.requests("/v1/chat/completions")) == 3 and response["status"] == "incomplete"
        target.clear()
        defaults = gateway.post("/v1/responses", {k: v for k, v in LOOP.items() if k != "max_infer_iters"}).ok()
        assert len(target.requests("/v1/chat/completions")) == 2 and defaults["max_tool_calls"] == 3


def test_loop_limits_have_finite_default_ceilings(start, upstream):
    """Without the new keys (an LCORE configuration): a client's 1,000 rounds and calls
    are cut to 50 and 200."""
    gateway, = start("forward", initial=10 ** 9)
    upstream.clear()
    response = gateway.post("/v1/responses", {"input": "hi", "max_infer_iters": 1000, "max_tool_calls": 1000}).ok()
    sent = upstream.requests("/v1/responses")[-1]["body"]
    assert (sent["max_infer_iters"], sent["max_tool_calls"], response["max_tool_calls"]) == (50, 200, 200)


def test_an_abandoned_tool_loop_is_charged_the_rounds_it_used(start):
    """Reproduction: a stream closed mid-loop was charged its first estimate (~630k
    tokens used, 3 charged). Now: its finished rounds and the one in flight."""
    gateway, = start(initial=10 ** 6)
    sock = open_stream(gateway.direct_port, {**LOOP, "max_infer_iters": 50})
    seen = b""
    deadline = time.monotonic() + 60
    while seen.count(b'"type":"response.mcp_call.completed"') < 6 and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        assert chunk
        seen += chunk
    reset(sock)
    wait_until(lambda: balance(gateway) < 10 ** 6, "the abandoned turn to be charged")
    time.sleep(0.5)
    charged = 10 ** 6 - balance(gateway)
    # The first estimate: the input (31 characters of JSON), the tools' definition, 50 out.
    first_estimate = 8 + 13 + 50
    assert charged > 3 * first_estimate, charged


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_cancelled_background_loop_carries_and_is_charged_its_usage(start, engine):
    gateway, = start(engine=engine, initial=10 ** 6)
    created = gateway.post("/v1/responses", {**LOOP, "max_infer_iters": 50, "background": True}).ok()

    def rounds() -> int:
        return calls(gateway.get(f"/v1/responses/{created['id']}").ok())
    wait_until(lambda: rounds() >= 4, "a few rounds", timeout=60)
    cancelled = gateway.post(f"/v1/responses/{created['id']}/cancel").ok()
    assert cancelled["status"] == "cancelled"
    final = gateway.get(f"/v1/responses/{created['id']}").ok()
    assert used(final) > 0   # the usage of its finished rounds
    wait_until(lambda: balance(gateway) < 10 ** 6, "the cancelled turn to be charged")
    assert 10 ** 6 - balance(gateway) >= used(final)


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_the_estimate_counts_the_context(start, mode):
    """Reproduction: 50 forks of a 1,400-word response with max_output_tokens 1 were
    admitted against a balance of 400. The previous turn's reported tokens are stored
    with its record and reserved (after the lookup, before anything is created)."""
    gateway, = start(mode, initial=4000)
    long = gateway.post("/v1/responses", {"input": " ".join(["word"] * 1400), "tool_choice": "none"}).ok()
    assert used(long) > 2000
    left = balance(gateway)
    assert left < 2000
    fork = gateway.post("/v1/responses", {"input": "hi", "max_output_tokens": 1, "tool_choice": "none",
                                          "previous_response_id": long["id"]})
    assert fork.status == 429, fork.body
    # The admission's own 2 tokens ("hi", 1 out) are held while the context is asked for.
    assert fork.json()["detail"]["cause"].startswith(f"User {DEFAULT_USER_ID} has {left - 2} tokens, but ")
    assert balance(gateway) == left   # nothing charged, nothing held
    fresh = gateway.post("/v1/responses", {"input": "hi", "max_output_tokens": 1, "tool_choice": "none"})
    assert fresh.status == 200   # a new conversation has no context


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_responses_in_progress_per_user_are_bounded(start, upstream, chat_upstream, mode):
    gateway, = start(mode, service={"max_responses_in_progress_per_user": 2})
    slow = {"input": "hi", "tool_choice": "none", "metadata": {"scripted_delay_ms": "1500"}}
    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(gateway.post, "/v1/responses", slow, timeout=60) for _ in range(2)]
        target = upstream if mode == "forward" else chat_upstream
        path = "/v1/responses" if mode == "forward" else "/v1/chat/completions"
        time.sleep(0.7)   # both admitted and waiting for the upstream's delayed answer
        assert not any(future.done() for future in running)
        before = len(target.requests(path))
        refused = gateway.post("/v1/responses", {"input": "hi"})
        assert refused.status == 429, refused.body
        assert refused.json()["detail"]["cause"] == (f"User {DEFAULT_USER_ID} has 2 responses in progress "
                                                     "(limit 2)")
        assert refused.headers["retry-after"] == "1"
        assert len(target.requests(path)) == before   # nothing sent
        assert gateway.post("/v1/responses?user_id=other", {"input": "hi"}).status == 200   # another user
        assert all(future.result().status == 200 for future in running)
    assert gateway.post("/v1/responses", {"input": "hi"}).status == 200


def reserved(start, engine: str, request) -> int:
    """What the quota database still holds reserved (0 once every turn ended and, on
    PostgreSQL, the replicas' holds gave their spare back)."""
    query = "SELECT COALESCE(SUM(reserved), 0) FROM gateway_quota_balances"
    storage = start.storage
    if engine == "postgres":
        keys = storage["postgres"]
        namespace = keys["namespace"]
        rows = request.getfixturevalue("postgres").admin(f'SET search_path TO "{namespace}"', query, db=keys["db"])
    else:
        import sqlite3

        with sqlite3.connect(storage["sqlite"]["db_path"], timeout=10) as db:
            rows = [list(row) for row in db.execute(query)]
    return int(rows[0][0])


@pytest.mark.parametrize("engine, replicas", [("sqlite", 1), ("sqlite", 2), ("postgres", 2)])
def test_the_invariant_under_a_mixed_concurrent_workload(start, engine, replicas, request):
    """On one balance, at once: plain turns (JSON and streamed), tool loops that run out
    of balance, streams abandoned mid-loop and background loops cancelled mid-loop.
    Completed turns are charged what the upstream reported, stopped ones at least that,
    nothing stays reserved, and the balance ends no lower than one round's estimate
    below zero (the loops' rounds here estimate well under 5,000 tokens)."""
    initial = 20000
    gateways = start(engine=engine, initial=initial, replicas=replicas)
    user = "mix"
    path = f"/v1/responses?user_id={user}"

    def plain(index: int) -> dict | None:
        gateway = gateways[index % replicas]
        if index % 2:
            status, frames = gateway.stream({"input": "hi", "tool_choice": "none"}, path=path)
            return checked(frames)[-1]["response"] if status == 200 else None
        reply = gateway.post(path, {"input": "hi", "tool_choice": "none"}, timeout=60)
        return reply.json() if reply.status == 200 else None

    def loop(index: int) -> dict | None:
        reply = gateways[index % replicas].post(path, LOOP, timeout=120)
        return reply.json() if reply.status == 200 else None

    def abandoned(index: int) -> None:
        gateway = gateways[index % replicas]
        sock = open_stream(gateway.direct_port, LOOP)   # the default user's balance: checked below
        read_until(sock, b"response.mcp_call.completed", timeout=60)
        reset(sock)

    def cancelled(index: int) -> dict | None:
        gateway = gateways[index % replicas]
        created = gateway.post(path, {**LOOP, "background": True})
        if created.status != 200:
            return None
        response_id = created.json()["id"]
        wait_until(lambda: calls(gateway.get(f"/v1/responses/{response_id}?user_id={user}").ok()) >= 1
                   or gateway.get(f"/v1/responses/{response_id}?user_id={user}").ok()["status"] != "in_progress",
                   "a round", timeout=60)
        gateway.post(f"/v1/responses/{response_id}/cancel?user_id={user}")
        return None

    with ThreadPoolExecutor(16) as pool:
        jobs = [pool.submit(plain, index) for index in range(8)] + [pool.submit(loop, index) for index in range(4)] \
            + [pool.submit(cancelled, index) for index in range(2)]
        results = [job.result() for job in jobs]
    completed = [response for response in results if response is not None and response["status"] == "completed"]
    assert completed, results
    loops = [response for response in results if response is not None and calls(response)]
    assert loops and all(response["status"] in ("completed", "incomplete") for response in loops)
    wait_until(lambda: reserved(start, engine, request) == 0, "nothing reserved", timeout=30)
    final = balance(gateways[0], user)
    charged = initial - final
    reported = sum(used(response) for response in results if response is not None)
    assert charged >= reported   # stopped turns add what they used
    assert final >= -5000, final
    # The abandoned streams (the default user's own balance, the same daily limiter).
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(abandoned, range(2)))
    wait_until(lambda: reserved(start, engine, request) == 0, "nothing reserved after the abandoned streams",
               timeout=30)
    assert balance(gateways[0]) >= -5000


@pytest.mark.parametrize("engine, replicas", [("sqlite", 1), ("sqlite", 2), ("postgres", 2)])
def test_the_invariant_in_forward_mode(start, engine, replicas, request):
    """Forward mode, where the upstream runs its own loop on one admission: at once on
    one balance, completed turns (JSON and streamed) are charged exactly what the
    upstream reported, streams abandoned and background runs cancelled before any usage
    exactly their reservation; nothing stays reserved."""
    initial = 10 ** 6
    gateways = start("forward", engine=engine, initial=initial, replicas=replicas)
    # No tools (the operator's MCP server would add its definition to the estimate).
    stall = {"input": "stall-stream please", "max_output_tokens": 99, "tool_choice": "none"}
    reservation = 6 + 99   # '"stall-stream please"': 21 characters of JSON, 4 a token, rounded up

    def plain(index: int) -> dict:
        gateway = gateways[index % replicas]
        if index % 2:
            status, frames = gateway.stream({"input": "hi", "tool_choice": "none"})
            assert status == 200
            return checked(frames)[-1]["response"]
        return gateway.post("/v1/responses", {"input": "hi", "tool_choice": "none"}, timeout=60).ok()

    def abandoned(index: int) -> None:
        sock = open_stream(gateways[index % replicas].direct_port, stall)
        assert read_until(sock, b"response.in_progress", timeout=60)[1]
        reset(sock)

    def cancelled(index: int) -> None:
        gateway = gateways[index % replicas]
        created = gateway.post("/v1/responses", {**stall, "background": True}).ok()
        assert gateway.post(f"/v1/responses/{created['id']}/cancel").ok()["status"] == "cancelled"

    with ThreadPoolExecutor(12) as pool:
        completed = [pool.submit(plain, index) for index in range(8)]
        stopped = [pool.submit(abandoned, index) for index in range(2)] + \
            [pool.submit(cancelled, index) for index in range(2)]
        reported = sum(used(job.result()) for job in completed)
        for job in stopped:
            job.result()
    expected = initial - reported - 4 * reservation
    wait_until(lambda: balance(gateways[0]) == expected, "every turn charged", timeout=30)
    wait_until(lambda: reserved(start, engine, request) == 0, "nothing reserved", timeout=30)
    assert balance(gateways[-1]) == expected
