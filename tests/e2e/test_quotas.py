"""Token quotas through `gateway serve` (issue 9), on both storage engines (SQLite and a
private PostgreSQL) and both backends (forward mode and the local engine): the 429
path, charges equal to the upstream's usage (JSON, stream, an abandoned stream, a
failed turn), 50 concurrent requests against room for 10, exact replenishment (the
test moves stored timestamps), a restart keeps balances, `available_quotas` keyed by
limiter name, quota storage down → 503, and topic summaries never charged."""

from __future__ import annotations

import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest

import yaml

from tests.support.flows import checked
from tests.support.gateway_proc import GATEWAY_BIN, gateway_config

DAILY = {"name": "daily", "type": "user_limiter", "initial_quota": 10000, "quota_increase": 1000, "period": "1 day"}
MONTHLY = {"name": "monthly", "type": "user_limiter", "initial_quota": 50000, "quota_increase": 50000,
           "period": "1 month", "replenish": "reset"}
CLUSTER = {"name": "cluster", "type": "cluster_limiter", "initial_quota": 1000000, "quota_increase": 0,
           "period": "1 day"}
HI = {"input": "hi", "max_output_tokens": 99, "tool_choice": "none"}   # reserves 1 + 99 = 100 tokens


class QuotaGateway:
    """A gateway with quota_handlers (on the same database as its turns unless the test
    names another), and SQL on the quota database."""

    def __init__(self, gateway, engine: str, storage: dict, postgres=None, restart=None):
        self.gateway, self.engine, self.storage, self.postgres = gateway, engine, storage, postgres
        self._restart = restart

    def restart(self) -> None:
        """A new `gateway serve` on the same configuration and database."""
        self.gateway.stop()
        self.gateway = self._restart()

    def edited(self) -> None:
        """After the test edits stored rows: on SQLite the gateway keeps the balances it
        uses in memory (the file's only writer), so it is restarted; replicas on
        PostgreSQL read the database again once their holds gave their spare back,
        within a scheduler period (quota/holds.py), as after the quota API changes one."""
        if self.engine == "sqlite":
            self.restart()
        else:
            nothing_held(self)

    def sql(self, statement: str) -> list[list]:
        if self.engine == "postgres":
            keys = self.storage["postgres"]
            return self.postgres.admin(f'SET search_path TO "{keys["namespace"]}"', statement, db=keys["db"])
        import sqlite3

        with sqlite3.connect(self.storage["sqlite"]["db_path"], timeout=10) as db:
            return [list(row) for row in db.execute(statement)]

    def quotas(self, user: str) -> dict[str, int]:
        return self.gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]

    def shift(self, limiter: str, subject: str, by: timedelta) -> None:
        """Move a balance's stored period times into the past (what waiting would do)."""
        (anchor, next_refill), = self.sql(f"SELECT anchor, next_refill FROM gateway_quota_balances "
                                          f"WHERE limiter = '{limiter}' AND subject = '{subject}'")
        moved = [(datetime.fromisoformat(value) - by).isoformat(timespec="microseconds")
                 for value in (anchor, next_refill)]
        self.sql(f"UPDATE gateway_quota_balances SET anchor = '{moved[0]}', next_refill = '{moved[1]}' "
                 f"WHERE limiter = '{limiter}' AND subject = '{subject}'")


@pytest.fixture
def quota_gateway(gateway_factory, upstream, upstream_with, tmp_path, request):
    def start(engine: str = "sqlite", mode: str = "forward", limiters=(DAILY, MONTHLY, CLUSTER), storage=None,
              **extra) -> QuotaGateway:
        postgres = request.getfixturevalue("postgres") if engine == "postgres" else None
        if storage is None:
            storage = {"postgres": postgres.new_database()} if postgres else \
                {"sqlite": {"db_path": str(tmp_path / f"gateway-{time.monotonic_ns()}.db")}}
        target = upstream if mode == "forward" else upstream_with("--no-responses")
        llama_stack = {"url": target.url, "max_retries": 0} | ({"api": "chat_completions"} if mode == "engine" else {})
        quota_storage = extra.pop("quota_storage", storage)

        def launch():
            return gateway_factory(target.url, database=storage, llama_stack=llama_stack,
                                   quota_handlers={**quota_storage, "limiters": list(limiters), **extra})
        return QuotaGateway(launch(), engine, quota_storage, postgres, launch)
    return start


ENGINES = ["sqlite", "postgres"]


@pytest.mark.parametrize("engine", ENGINES)
def test_refused_with_lcores_429_and_nothing_created_or_sent(quota_gateway, upstream, engine):
    quotas = quota_gateway(engine, limiters=[{**DAILY, "initial_quota": 105}])
    gateway = quotas.gateway
    first = gateway.post("/v1/responses?user_id=ann", HI).ok()
    spent = first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
    assert first["available_quotas"] == {"daily": 105 - spent}
    upstream.clear()
    reply = gateway.post("/v1/responses?user_id=ann", {**HI, "conversation": first["conversation"]})
    assert reply.status == 429, reply.body
    body = reply.json()
    assert body["detail"] == {"response": "The quota has been exceeded",
                              "cause": f"User ann has {105 - spent} tokens, but 100 tokens are needed"}
    assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "insufficient_quota"
    assert reply.headers["x-should-retry"] == "false"
    assert 0 < int(reply.headers["retry-after"]) <= 86400
    assert upstream.requests() == []                                       # nothing sent upstream
    quotas.sql("UPDATE gateway_quota_balances SET available = 0")
    quotas.edited()
    gateway = quotas.gateway
    upstream.clear()
    new = gateway.post("/v1/responses?user_id=ann", HI)
    assert new.status == 429 and new.json()["detail"]["cause"] == "User ann has no available tokens"
    stream = gateway.post("/v1/responses?user_id=ann", {**HI, "stream": True})
    assert stream.status == 429 and stream.headers["content-type"].startswith("application/json")
    assert upstream.requests() == []
    assert quotas.sql("SELECT COUNT(*) FROM gateway_conversations WHERE user_id = 'ann'") == [[1]]
    nothing_held(quotas)
    # OpenAI's SDK does not retry (x-should-retry) and raises its RateLimitError.
    import openai

    with pytest.raises(openai.RateLimitError) as caught:
        openai.OpenAI(base_url=gateway.base_url, api_key="test-token", max_retries=2).responses.create(
            input="hi", extra_query={"user_id": "ann"})
    assert caught.value.body["code"] == "insufficient_quota"
    assert upstream.requests() == []


def usage_of(response: dict) -> int:
    return response["usage"]["input_tokens"] + response["usage"]["output_tokens"]


@pytest.mark.parametrize("engine, mode", [("sqlite", "forward"), ("postgres", "forward"), ("sqlite", "engine"),
                                          ("postgres", "engine")])
def test_charges_equal_the_upstreams_usage_per_limiter_name(quota_gateway, engine, mode):
    quotas = quota_gateway(engine, mode)
    gateway = quotas.gateway
    assert quotas.quotas("bea") == {"daily": 10000, "monthly": 50000, "cluster": 1000000}
    first = gateway.post("/v1/responses?user_id=bea", HI).ok()
    spent = usage_of(first)
    assert spent > 0
    assert first["available_quotas"] == {"daily": 10000 - spent, "monthly": 50000 - spent, "cluster": 1000000 - spent}
    frames = gateway.stream({**HI, "input": "and more", "previous_response_id": first["id"]},
                            path="/v1/responses?user_id=bea")[1]
    events = checked(frames)
    assert next(e for e in events if e["type"] == "response.in_progress")["response"]["available_quotas"] == {}
    terminal = events[-1]["response"]
    spent += usage_of(terminal)
    assert terminal["available_quotas"] == {"daily": 10000 - spent, "monthly": 50000 - spent,
                                            "cluster": 1000000 - spent}
    assert quotas.quotas("bea") == terminal["available_quotas"]
    # Another user has their own user balances and shares the cluster's.
    assert quotas.quotas("cid") == {"daily": 10000, "monthly": 50000, "cluster": 1000000 - spent}
    nothing_held(quotas)


def test_abandoned_and_failed_turns(quota_gateway, upstream):
    quotas = quota_gateway(limiters=[DAILY])
    gateway = quotas.gateway
    # A stream abandoned before the upstream reported usage is charged its reservation.
    with socket.create_connection(("127.0.0.1", gateway.port)) as client:
        body = b'{"input": "stall-stream please", "max_output_tokens": 99, "stream": true}'
        client.sendall(b"POST /v1/responses?user_id=dan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert b"response.in_progress" in _read_until(client, b"response.in_progress")
    reserved = 6 + 99   # '"stall-stream please"': 21 characters of JSON, 4 a token, rounded up
    _wait_for(lambda: quotas.quotas("dan") != {"daily": 10000})
    assert quotas.quotas("dan") == {"daily": 10000 - reserved}
    nothing_held(quotas)
    # A turn the upstream failed before reporting usage is charged nothing.
    assert gateway.post("/v1/responses?user_id=dan", {**HI, "input": "fail-upstream"}).status == 500
    failed = checked(gateway.stream({**HI, "input": "fail-upstream"}, path="/v1/responses?user_id=dan")[1])[-1]
    assert failed["type"] == "response.failed"
    assert quotas.quotas("dan") == {"daily": 10000 - reserved} == failed["response"]["available_quotas"]
    nothing_held(quotas)


def _read_until(client: socket.socket, marker: bytes) -> bytes:
    client.settimeout(30)
    seen = b""
    while marker not in seen:
        chunk = client.recv(65536)
        if not chunk:
            break
        seen += chunk
    return seen


def nothing_held(quotas) -> None:
    """No tokens stay reserved: on PostgreSQL a replica's holds give their spare back
    within a scheduler period (quota/holds.py); on SQLite nothing is held in the file."""
    _wait_for(lambda: quotas.sql("SELECT COALESCE(SUM(tokens), 0) FROM gateway_quota_reservations") == [[0]]
              and quotas.sql("SELECT COALESCE(SUM(reserved), 0) FROM gateway_quota_balances") == [[0]])


def _wait_for(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def run_concurrently(replicas, user: str, count: int) -> list:
    # Long enough that all of them have asked before the first admitted one ends and
    # gives its reservation back, even on a loaded machine (at 300 ms, the full suite
    # once spread the 50 over more than that, and 18 were admitted one after another).
    slow = {**HI, "metadata": {"scripted_delay_ms": "3000"}}

    def one(index: int):
        return replicas[index % len(replicas)].post(f"/v1/responses?user_id={user}", slow, timeout=60)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def check_invariant(quotas: QuotaGateway, replies, user: str, room: int) -> None:
    admitted = [reply.json() for reply in replies if reply.status == 200]
    refused = [reply for reply in replies if reply.status != 200]
    assert len(admitted) == 10, [reply.status for reply in replies]
    assert {reply.status for reply in refused} == {429}
    # The final balance is what the admitted turns leave, run one after another.
    assert quotas.quotas(user)["daily"] == room - sum(usage_of(response) for response in admitted)
    nothing_held(quotas)


@pytest.mark.parametrize("engine, mode", [("sqlite", "forward"), ("postgres", "forward"), ("sqlite", "engine")])
def test_fifty_concurrent_requests_against_room_for_ten(quota_gateway, engine, mode):
    quotas = quota_gateway(engine, mode, limiters=[{**DAILY, "initial_quota": 1000}])
    check_invariant(quotas, run_concurrently([quotas.gateway], "eve", 50), "eve", 1000)


def test_two_replicas_on_one_postgres_share_balances(quota_gateway):
    first = quota_gateway("postgres", limiters=[{**DAILY, "initial_quota": 1000}, CLUSTER])
    second = quota_gateway("postgres", limiters=[{**DAILY, "initial_quota": 1000}, CLUSTER], storage=first.storage)
    spent = usage_of(first.gateway.post("/v1/responses?user_id=fay", HI).ok())
    assert second.quotas("fay") == {"daily": 1000 - spent, "cluster": 1000000 - spent}   # seen at once
    first.sql("UPDATE gateway_quota_balances SET available = 1000 WHERE limiter = 'daily'")
    check_invariant(first, run_concurrently([first.gateway, second.gateway], "fay", 50), "fay", 1000)


@pytest.mark.parametrize("engine", ENGINES)
def test_replenishment_is_exact_and_a_restart_keeps_balances(quota_gateway, gateway_factory, engine):
    quotas = quota_gateway(engine)
    gateway = quotas.gateway
    spent = usage_of(gateway.post("/v1/responses?user_id=gus", HI).ok())
    # Three days and a bit pass for the daily limiter: three top-ups, once each, whoever asks.
    quotas.shift("daily", "gus", timedelta(days=3, hours=1))
    quotas.edited()
    gateway = quotas.gateway
    assert quotas.quotas("gus")["daily"] == 10000 - spent + 3000
    for _ in range(3):
        spent += usage_of(gateway.post("/v1/responses?user_id=gus", HI).ok())
    assert quotas.quotas("gus") == {"daily": 13000 - spent, "monthly": 50000 - spent, "cluster": 1000000 - spent}
    assert quotas.sql("SELECT periods FROM gateway_quota_balances WHERE limiter = 'daily' AND subject = 'gus'") \
        == [[3]]
    # A month passes for the monthly limiter: it resets to its initial quota, once.
    quotas.shift("monthly", "gus", timedelta(days=32))
    quotas.edited()
    gateway = quotas.gateway
    after_reset = gateway.post("/v1/responses?user_id=gus", HI).ok()
    assert after_reset["available_quotas"]["monthly"] == 50000 - usage_of(after_reset)
    before = quotas.quotas("gus")
    # A restart (a new process on the same config and database) keeps every balance.
    quotas.restart()
    assert quotas.quotas("gus") == before


def test_quota_storage_down_is_503(quota_gateway, gateway_factory, upstream, tmp_path):
    from tests.support.postgres import start_postgres

    server = start_postgres(tmp_path / "pg")
    try:
        keys = server.new_database()
        gateway = gateway_factory(upstream.url, quota_handlers={"postgres": keys, "limiters": [DAILY]})
        assert gateway.post("/v1/responses?user_id=hal", HI).ok()["available_quotas"]["daily"] < 10000
        server.proc.stop()
        upstream.clear()
        reply = gateway.post("/v1/responses?user_id=hal", HI)
        assert reply.status == 503, reply.body
        assert reply.json()["detail"] == {"response": "Unable to connect to quota storage", "cause": "Connection error."}
        assert upstream.requests() == []     # fail closed: nothing sent upstream
        assert keys["password"] not in gateway.log()
    finally:
        server.stop()
    # At start-up: `gateway serve` stops, naming the key and the server.
    config = gateway_config(upstream.url, tmp_path / "unused.db", quota_handlers={"postgres": keys, "limiters": [DAILY]})
    (tmp_path / "down.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([str(GATEWAY_BIN), "serve", "-c", str(tmp_path / "down.yaml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert f"error: quota_handlers.postgres: cannot connect to {keys['user']}@127.0.0.1:{keys['port']}" in result.stderr
    assert keys["password"] not in result.stderr + result.stdout


def test_quota_storage_in_its_own_sqlite_file(quota_gateway, tmp_path):
    """`quota_handlers.sqlite` naming another file than `database`: the charge is
    committed there first, then the turn's record; balances survive a restart."""
    quotas = quota_gateway(limiters=[DAILY], storage={"sqlite": {"db_path": str(tmp_path / "turns.db")}},
                           quota_storage={"sqlite": {"db_path": str(tmp_path / "quotas.db")}})
    first = quotas.gateway.post("/v1/responses?user_id=ivy", HI).ok()
    assert first["available_quotas"] == {"daily": 10000 - usage_of(first)}
    assert quotas.sql("SELECT available FROM gateway_quota_balances WHERE subject = 'ivy'") == \
        [[10000 - usage_of(first)]]
    quotas.restart()
    assert quotas.quotas("ivy") == first["available_quotas"]


def test_limiters_without_storage_warn_and_are_not_enforced(gateway_factory, upstream):
    """As in LCORE: `quota_handlers` naming no storage is accepted, logged, not enforced."""
    gateway = gateway_factory(upstream.url, quota_handlers={"limiters": [{**DAILY, "initial_quota": 0}]})
    reply = gateway.post("/v1/responses?user_id=jo", HI).ok()
    assert reply["available_quotas"] == {}
    assert gateway.get("/v1/quotas?user_id=jo").ok() == {"enforced": False, "subject": "jo", "available_quotas": {},
                                                         "limiters": []}
    assert "quota_handlers: limiters are configured without sqlite or postgres storage" in gateway.log()


def test_a_client_that_leaves_after_completion_is_charged_the_usage(quota_gateway):
    quotas = quota_gateway(limiters=[DAILY])
    gateway = quotas.gateway
    usage = usage_of(gateway.post("/v1/responses?user_id=ref", HI).ok())   # the same turn, read in full
    with socket.create_connection(("127.0.0.1", gateway.port)) as client:
        body = b'{"input": "hi", "max_output_tokens": 99, "tool_choice": "none", "stream": true}'
        client.sendall(b"POST /v1/responses?user_id=kim HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        # Nothing is read: the client goes once the turn is settled.
        _wait_for(lambda: quotas.quotas("kim") != {"daily": 10000})
    assert quotas.quotas("kim") == {"daily": 10000 - usage}
    nothing_held(quotas)


def test_a_cancelled_background_turn_is_charged_its_reservation(quota_gateway):
    """Cancelling is no way around a quota: a background turn cancelled before the
    upstream reported usage is charged what it reserved, as an abandoned stream is."""
    quotas = quota_gateway(limiters=[DAILY])
    gateway = quotas.gateway
    created = gateway.post("/v1/responses?user_id=eve", {"input": "stall-stream please", "max_output_tokens": 99,
                                                         "background": True}).ok()
    assert created["status"] == "in_progress"
    cancelled = gateway.post(f"/v1/responses/{created['id']}/cancel?user_id=eve").ok()
    assert cancelled["status"] == "cancelled"
    reserved = 6 + 99   # as in test_abandoned_and_failed_turns: the same input and output cap
    _wait_for(lambda: quotas.quotas("eve") != {"daily": 10000})
    assert quotas.quotas("eve") == {"daily": 10000 - reserved}
