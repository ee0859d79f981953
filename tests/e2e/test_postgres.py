"""The gateway on PostgreSQL (`database.postgres`), through `gateway serve`: the main
conversation flows, two replicas on one database behaving as one gateway (a
conversation started on one continues on the other at once), replicas racing their
migrations at start-up, and a database that is down (readiness 503, LCORE's database
error, a clear start-up error)."""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from gateway.storage.migrations import MIGRATIONS

from tests.support.flows import checked
from tests.support.gateway_proc import GATEWAY_BIN, gateway_config
from tests.support.postgres import start_postgres


@pytest.fixture
def pg_gateway(gateway_factory, upstream, postgres):
    def start(database: dict | None = None, **overrides):
        keys = database or postgres.new_database(namespace="lightspeed-stack")
        gateway = gateway_factory(upstream.url, database={"postgres": keys}, **overrides)
        gateway.pg = keys
        return gateway
    return start


def rows(postgres, keys: dict, sql: str) -> list[list]:
    return postgres.admin(f'SET search_path TO "{keys["namespace"]}"', sql, db=keys["db"])


def test_conversation_flows_on_postgres(pg_gateway, upstream, postgres):
    gateway = pg_gateway()
    client = gateway.client()
    first = client.responses.create(input="first", extra_query={"user_id": "erin"})
    cid = first.conversation.id   # the SDK gets the object form; the raw requests below name it as a string
    # Continued by conversation (streamed), then by previous_response_id.
    frames = gateway.stream({"input": "second", "conversation": cid}, path="/v1/responses?user_id=erin")
    events = checked(frames[1])
    second = events[-1]["response"]
    assert second["output_text"].startswith("Scripted reply (turn 2, 3 messages)")
    third = gateway.post("/v1/responses?user_id=erin", {"input": "third", "previous_response_id": second["id"]}).ok()
    assert third["conversation"] == cid  # the latest turn: a continuation, not a fork
    # Recorded before each answer: the rows are there now, no waiting.
    turns = rows(postgres, gateway.pg, "SELECT turn_number, response_id, prior_response_id FROM gateway_turns "
                                       "ORDER BY turn_number")
    assert turns == [[1, first.id, None], [2, second["id"], first.id], [3, third["id"], second["id"]]]
    conversation = rows(postgres, gateway.pg, "SELECT user_id, message_count, last_response_id, last_used_model "
                                              "FROM gateway_conversations")
    assert conversation == [["erin", 3, third["id"], "scripted-chat"]]
    # Retrieve, a fork, another user's 404, delete.
    assert gateway.get(f"/v1/responses/{second['id']}?user_id=erin").ok()["conversation"] == cid
    fork = gateway.post("/v1/responses?user_id=erin", {"input": "fork", "previous_response_id": first.id}).ok()
    assert fork["conversation"] != cid
    assert gateway.get(f"/v1/responses/{second['id']}?user_id=mallory").status == 404
    assert gateway.delete(f"/v1/responses/{third['id']}?user_id=erin").status == 200
    after = gateway.post("/v1/responses?user_id=erin", {"input": "after delete", "conversation": cid})
    assert after.ok()["status"] == "completed"
    assert rows(postgres, gateway.pg, "SELECT prior_response_id FROM gateway_turns WHERE response_id = "
                                      f"'{after.json()['id']}'") == [[second["id"]]]
    assert gateway.pg["password"] not in gateway.log()


def test_two_replicas_behave_as_one_gateway(pg_gateway, upstream, postgres):
    first_replica = pg_gateway()
    second_replica = pg_gateway(database=first_replica.pg)
    replicas = (first_replica, second_replica)
    start = first_replica.post("/v1/responses?user_id=frank", {"input": "started on one"}).ok()
    conversation, last = start["conversation"], start["id"]
    # Each turn continues, at once, on the other replica: by conversation (JSON and
    # stream) and by the latest response id (a continuation there, not a fork).
    for turn in range(2, 8):
        replica = replicas[(turn - 1) % 2]
        if turn % 3 == 0:
            frames = replica.stream({"input": f"turn {turn}", "conversation": conversation},
                                    path="/v1/responses?user_id=frank")
            reply = checked(frames[1])[-1]["response"]
        elif turn % 3 == 1:
            reply = replica.post("/v1/responses?user_id=frank", {"input": f"turn {turn}",
                                                                 "previous_response_id": last}).ok()
        else:
            reply = replica.post("/v1/responses?user_id=frank", {"input": f"turn {turn}",
                                                                 "conversation": conversation}).ok()
        assert reply["conversation"] == conversation
        assert reply["output_text"].startswith(f"Scripted reply (turn {turn}, "), reply["output_text"]
        # The other replica finds the response it has never seen, at once.
        other = replicas[turn % 2]
        assert other.get(f"/v1/responses/{reply['id']}?user_id=frank").ok()["id"] == reply["id"]
        last = reply["id"]
    numbers = rows(postgres, first_replica.pg, "SELECT turn_number FROM gateway_turns ORDER BY turn_number")
    assert [row[0] for row in numbers] == list(range(1, 8))
    # Concurrent turns of many conversations on both replicas: one consistent history each.
    starts = [replicas[i % 2].post(f"/v1/responses?user_id=u{i}", {"input": "go"}).ok() for i in range(6)]

    def continue_on_both(i: int) -> list[str]:
        return [replicas[(i + n) % 2].post(f"/v1/responses?user_id=u{i}",
                                           {"input": f"n{n}", "conversation": starts[i]["conversation"]}).ok()["id"]
                for n in range(4)]

    with ThreadPoolExecutor(6) as pool:
        continued = list(pool.map(continue_on_both, range(6)))
    for start_reply, ids in zip(starts, continued):
        chain = rows(postgres, first_replica.pg,
                     "SELECT turn_number, prior_response_id, response_id FROM gateway_turns "
                     f"WHERE conversation_id = '{start_reply['conversation'][5:]}' ORDER BY turn_number")
        assert chain == [[1, None, start_reply["id"]]] + [[n + 2, ([start_reply["id"]] + ids)[n], ids[n]]
                                                          for n in range(4)]


def test_replicas_starting_together_migrate_once(gateway_factory, upstream, postgres):
    keys = postgres.new_database(namespace="lightspeed-stack")
    started: list = []
    barrier = threading.Barrier(3)

    def start() -> None:
        barrier.wait()
        started.append(gateway_factory(upstream.url, database={"postgres": keys}))

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(started) == 3
    assert [row[0] for row in rows(postgres, keys, "SELECT version FROM gateway_migrations ORDER BY version")] \
        == [version for version, _ in MIGRATIONS]
    for replica in started:
        assert replica.get("/readiness").ok()["ready"] is True
        replica.post("/v1/responses", {"input": "hello"}).ok()


def test_postgres_down(gateway_factory, upstream, tmp_path):
    server = start_postgres(tmp_path / "pg")
    try:
        keys = server.new_database()
        gateway = gateway_factory(upstream.url, database={"postgres": keys})
        first = gateway.post("/v1/responses", {"input": "while up"}).ok()
        assert gateway.get("/readiness").ok()["ready"] is True
        server.proc.stop()
        reply = gateway.get("/readiness")
        assert reply.status == 503 and reply.json()["reason"] == "Database unavailable"
        # A turn that cannot be recorded is not reported as done: LCORE's database error.
        reply = gateway.post("/v1/responses", {"input": "while down", "conversation": first["conversation"]})
        assert reply.status == 500, reply.body
        assert reply.json()["detail"] == {"response": "Database query failed", "cause": "Failed to query the database"}
        reply = gateway.post("/v1/responses", {"input": "new while down"})
        assert reply.status == 500 and reply.json()["error"]["code"] == "database_error"
        frames = gateway.stream({"input": "streamed while down"})[1]
        assert frames[-2][1]["type"] == "response.failed" and frames[-1] == (None, "[DONE]")
        assert "database unavailable" in gateway.log().lower()
        assert keys["password"] not in gateway.log()
        # The error line names the route's template, never the raw path (ids in paths stay out).
        cid = first["conversation"].removeprefix("conv_")
        assert gateway.get(f"/v1/conversations/{cid}").status >= 500
        assert "database unavailable on GET /v1/conversations/{conversation_id} (request " in gateway.log()
        assert cid not in gateway.log()
    finally:
        server.stop()
    # At start-up: `gateway serve` stops with the key and the server named.
    config = gateway_config(upstream.url, tmp_path / "unused.db", database={"postgres": keys})
    (tmp_path / "down.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([str(GATEWAY_BIN), "serve", "-c", str(tmp_path / "down.yaml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert f"error: database.postgres: cannot connect to {keys['user']}@127.0.0.1:{keys['port']}/{keys['db']}" \
        in result.stderr
    assert keys["password"] not in result.stderr + result.stdout


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_turn_is_committed_before_its_answer(engine, gateway_factory, upstream, request):
    """On both engines the row of a turn exists when the client has the JSON body or the
    terminal event: read straight after, without waiting for a background writer."""
    if engine == "postgres":
        postgres = request.getfixturevalue("postgres")
        keys = postgres.new_database()
        gateway = gateway_factory(upstream.url, database={"postgres": keys})

        def turn(response_id: str) -> list:
            return rows(postgres, keys, f"SELECT status FROM gateway_turns WHERE response_id = '{response_id}'")
    else:
        from tests.support.gateway_db import GatewayDb

        gateway = gateway_factory(upstream.url)
        db = GatewayDb.of(gateway)

        def turn(response_id: str) -> list:
            row = db.turn(response_id)
            return [[row["status"]]] if row else []
    for n in range(5):
        first = gateway.post("/v1/responses", {"input": f"json {n}"}).ok()
        assert turn(first["id"]) == [["completed"]]
        terminal = checked(gateway.stream({"input": f"stream {n}", "conversation": first["conversation"]})[1])[-1]
        assert turn(terminal["response"]["id"]) == [["completed"]]


def test_engine_mode_on_two_replicas(gateway_factory, upstream_with, postgres):
    """The local engine's stored responses live in PostgreSQL too: a response made on
    one replica is read, listed and continued on the other at once."""
    chat = upstream_with("--no-responses")
    keys = postgres.new_database(namespace="lightspeed-stack")
    settings = {"llama_stack": {"url": chat.url, "max_retries": 0, "api": "chat_completions"},
                "database": {"postgres": keys}}
    one, two = gateway_factory(chat.url, **settings), gateway_factory(chat.url, **settings)
    first = one.post("/v1/responses?user_id=gina", {"input": "engine on postgres"}).ok()
    assert two.get(f"/v1/responses/{first['id']}?user_id=gina").ok()["output_text"] == first["output_text"]
    second = two.post("/v1/responses?user_id=gina", {"input": "and on", "previous_response_id": first["id"]}).ok()
    assert second["output_text"] == "Scripted reply (turn 2, 3 messages): and on"
    listed = one.get("/v1/responses?user_id=gina&order=asc").ok()
    assert [item["id"] for item in listed["data"]] == [first["id"], second["id"]]
    assert one.get(f"/v1/responses/{first['id']}?user_id=mallory").status == 404
    stored = rows(postgres, keys, "SELECT id FROM gateway_responses ORDER BY seq")
    assert stored == [[first["id"]], [second["id"]]]


def test_conversation_items_on_two_replicas(pg_gateway, upstream, postgres):
    """OpenAI's Conversations API on PostgreSQL (issue 23): items added on one replica of
    a conversation the gateway keeps are the next turn's input on the other, once."""
    llama_stack = {"llama_stack": {"url": upstream.url, "max_retries": 0, "conversations": "gateway"}}
    first_replica = pg_gateway(**llama_stack)
    second_replica = pg_gateway(database=first_replica.pg, **llama_stack)
    conversation = first_replica.client().conversations.create(
        items=[{"role": "user", "content": "remember the word pineapple"}], metadata={"k": "v"})
    assert second_replica.client().conversations.retrieve(conversation.id).metadata == {"k": "v"}
    upstream.clear()
    second_replica.client().responses.create(input="which word?", conversation=conversation.id)
    assert "pineapple" in str(upstream.last()["body"]["input"])
    upstream.clear()
    first_replica.client().responses.create(input="again", conversation=conversation.id)
    assert upstream.last()["body"]["input"] == "again"
    assert len(first_replica.client().conversations.items.list(conversation.id).data) == 1
    assert second_replica.client().conversations.delete(conversation.id).deleted is True
    assert rows(postgres, first_replica.pg, "SELECT COUNT(*) FROM gateway_conversation_items") == [[0]]
