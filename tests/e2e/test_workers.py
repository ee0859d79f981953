"""`service.workers: 2` through `gateway serve` (issue 43): two worker processes serve the
one port under a supervisor, a conversation continues on either, a killed worker is
replaced (logged; the port stays served), and SIGTERM drains every worker (a stream in
flight finishes within the grace, the supervisor exits 0). The quota invariant, an
interrupt and a background cancel reaching the other worker, on SQLite here and on
PostgreSQL in test_workers_postgres.py.

Which worker answered: each worker's JSON access line carries `"worker"` and `"pid"`;
a request sent with its own X-Request-ID is found there. A connection is pinned to a
worker by keeping it open (`Pinned`): every request on it goes to the worker that
accepted it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import time
import uuid
from typing import Any

import pytest

from tests.e2e.test_background import VERY_SLOW
from tests.e2e.test_drain import events, posted, read_to_end, refused
from tests.e2e.test_interrupt import Stream
from tests.support.gateway_proc import HttpReply, serving
from tests.support.raw_client import read_until, wait_until

PACED = {"scripted_delay_ms": "150", "scripted_deltas": "20"}   # ~3 s of text
DAILY = {"name": "daily", "type": "user_limiter", "initial_quota": 1000, "quota_increase": 0, "period": "1 day"}
HI = {"input": "hi", "max_output_tokens": 99, "tool_choice": "none"}   # reserves 1 + 99 = 100 tokens


def access_lines(gateway) -> list[dict[str, Any]]:
    lines = []
    for line in gateway.log().splitlines():
        if line.startswith("{") and '"type":"access"' in line:
            lines.append(json.loads(line))
    return lines


def pid_of(gateway, request_id: str, timeout: float = 10) -> int:
    """The pid of the worker that answered the request (its access line)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in access_lines(gateway):
            if line["request_id"] == request_id:
                return int(line["pid"])
        assert time.monotonic() < deadline, f"no access line for {request_id}"
        time.sleep(0.05)


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


class Pinned:
    """A keep-alive connection to the gateway's port, and the worker that accepted it."""

    def __init__(self, gateway):
        self.gateway = gateway
        self.conn = http.client.HTTPConnection("127.0.0.1", gateway.direct_port, timeout=60)
        rid = uuid.uuid4().hex
        self.conn.request("GET", "/v1/info", headers={"X-Request-ID": rid})
        reply = self.conn.getresponse()
        reply.read()
        assert reply.status == 200
        self.pid = pid_of(gateway, rid)

    def request(self, method: str, path: str, body: Any = None) -> HttpReply:
        rid = uuid.uuid4().hex
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers={"Content-Type": "application/json", "X-Request-ID": rid})
        reply = self.conn.getresponse()
        answer = HttpReply(reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read())
        assert pid_of(self.gateway, rid) == self.pid, "a keep-alive connection changed worker"
        return answer

    def close(self) -> None:
        self.conn.close()


def one_on_each(gateway, count: int = 2, tries: int = 60) -> list[Pinned]:
    """Connections pinned to `count` different workers."""
    by_pid: dict[int, Pinned] = {}
    spare: list[Pinned] = []
    for _ in range(tries):
        pinned = Pinned(gateway)
        if pinned.pid in by_pid:
            spare.append(pinned)
        else:
            by_pid[pinned.pid] = pinned
        if len(by_pid) == count:
            break
    for pinned in spare:
        pinned.close()
    assert len(by_pid) == count, f"{tries} connections reached {len(by_pid)} worker(s)"
    return list(by_pid.values())


@pytest.fixture
def workers(gateway_factory, upstream, tmp_path):
    def start(target=upstream, count: int = 2, database: dict | None = None, **overrides):
        storage = database or {"sqlite": {"db_path": str(tmp_path / f"gateway-{time.monotonic_ns()}.db")}}
        service = {"workers": count, **overrides.pop("service", {})}
        gateway = gateway_factory(target.url, database=storage, service=service, **overrides)
        gateway.storage = storage
        wait_until(lambda: len(serving(gateway)) == count, "every worker serving", timeout=60)
        return gateway
    return start


def test_two_worker_processes_serve_the_port(workers):
    gateway = workers()
    supervisor = gateway.proc.popen.pid
    pids = serving(gateway)
    assert sorted(pids) == [0, 1] and len(set(pids.values())) == 2
    assert all(parent_of(pid) == supervisor for pid in pids.values())
    pinned = one_on_each(gateway)
    assert {p.pid for p in pinned} == set(pids.values())
    for p in pinned:
        assert p.request("GET", "/readiness").json()["ready"] is True   # each answers for itself
        p.close()
    log = gateway.messages()
    assert "Running on http://127.0.0.1" in log and "(2 workers)" in log
    assert "service.workers" not in log   # no longer "accepted but not implemented"
    # One user, one hash in every worker's access line (the group's key).
    users = {line["user"] for line in access_lines(gateway) if line.get("route") == "/v1/info"}
    assert len(users) == 1, users


def test_a_conversation_continues_across_workers(workers):
    gateway = workers()
    first, second = one_on_each(gateway)
    previous = first.request("POST", "/v1/responses?user_id=cara", {"input": "turn 1"}).ok()
    for turn in range(2, 9):
        on = second if turn % 2 == 0 else first
        reply = on.request("POST", "/v1/responses?user_id=cara",
                           {"input": f"turn {turn}", "previous_response_id": previous["id"]}).ok()
        assert reply["conversation"] == previous["conversation"]
        assert reply["output_text"].startswith(f"Scripted reply (turn {turn},"), reply["output_text"]
        previous = reply
    # The conversation as either worker shows it: eight turns.
    for on in (first, second):
        listed = on.request("GET", f"/v1/conversations/{previous['conversation']}?user_id=cara").ok()
        assert len([m for m in listed["chat_history"]]) == 8, listed
    first.close()
    second.close()


def test_a_killed_worker_is_started_again_and_the_port_stays_served(workers):
    gateway = workers()
    before = serving(gateway)
    victim = before[1]
    os.kill(victim, signal.SIGKILL)
    # Served throughout by the other worker.
    for _ in range(5):
        assert gateway.post("/v1/responses?user_id=kim", {"input": "still there"}).status == 200
    wait_until(lambda: serving(gateway).get(1) not in (None, victim), "worker 1 replaced", timeout=30)
    log = gateway.messages()
    assert f"worker 1 (pid {victim}) died (killed by SIGKILL)" in log, log[-3000:]
    replacement = serving(gateway)[1]
    assert parent_of(replacement) == gateway.proc.popen.pid
    assert {p.pid for p in one_on_each(gateway)} == {before[0], replacement}
    # Dying again soon after its start: the next start waits twice as long (no spinning).
    os.kill(replacement, signal.SIGKILL)
    wait_until(lambda: f"worker 1 (pid {replacement}) died" in gateway.messages(), "the second death logged")
    assert f"worker 1 (pid {replacement}) died (killed by SIGKILL)" in gateway.messages()
    died = [line for line in gateway.messages().splitlines() if "worker 1 (pid" in line and "died" in line]
    assert died[0].endswith("starting it again in 0.5 s") and died[1].endswith("starting it again in 1 s"), died
    wait_until(lambda: serving(gateway).get(1) not in (None, victim, replacement), "worker 1 replaced again",
               timeout=30)


def test_sigterm_drains_every_worker_and_the_supervisor_exits_0(workers):
    gateway = workers(service={"shutdown_grace_seconds": 20})
    pids = serving(gateway)
    environments = [dict(entry.split("=", 1) for entry in open(f"/proc/{pid}/environ").read().split("\0") if entry)
                    for pid in pids.values()]
    assert sorted(env["GATEWAY_WORKER_ID"] for env in environments) == ["0", "1"]
    metrics_dir = environments[0]["PROMETHEUS_MULTIPROC_DIR"]
    assert {env["PROMETHEUS_MULTIPROC_DIR"] for env in environments} == {metrics_dir} and os.path.isdir(metrics_dir)
    stream = posted(gateway.direct_port, "/v1/responses?user_id=dora",
                    {"input": "hello", "stream": True, "tool_choice": "none", "metadata": PACED})
    head, _ = read_until(stream, b"response.output_text.delta")
    gateway.proc.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while not refused(gateway.direct_port):
        assert time.monotonic() < deadline, "the port still accepts connections while draining"
        time.sleep(0.05)
    tail = read_to_end(stream)
    stream.close()
    assert events(head + tail)[-1]["type"] == "response.completed"
    assert gateway.proc.popen.wait(30) == 0
    assert not os.path.exists(metrics_dir)   # the supervisor's to remove
    for pid in pids.values():
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    log = gateway.messages()
    assert log.count("shutting down: drained in") == 2, log[-3000:]
    assert "worker 0 (pid" in log and "stopped (exit status 0)" in log and "all workers stopped" in log


def test_connections_the_kernel_accepted_during_a_drain_are_served(workers):
    """Connected while both workers are busy draining (never accepted by one): served,
    not reset: each worker takes its socket's queue before the last descriptor closes."""
    gateway = workers(service={"shutdown_grace_seconds": 20})
    # Each worker busy with a stream so neither closes at once.
    streams = [posted(gateway.direct_port, f"/v1/responses?user_id=s{i}",
                      {"input": "hello", "stream": True, "tool_choice": "none", "metadata": PACED})
               for i in range(4)]
    for stream in streams:
        read_until(stream, b"response.output_text.delta")
    waiting = [socket.create_connection(("127.0.0.1", gateway.direct_port)) for _ in range(10)]
    gateway.proc.popen.send_signal(signal.SIGTERM)
    for sock in waiting:
        sock.sendall(b"GET /liveness HTTP/1.1\r\nHost: x\r\n\r\n")
    for sock in waiting:
        reply, _ = read_until(sock, b"}", timeout=20)
        assert reply.startswith(b"HTTP/1.1 200"), reply
        sock.close()
    for stream in streams:
        read_to_end(stream)
        stream.close()
    assert gateway.proc.popen.wait(30) == 0


# Across workers: state one worker holds reaching the other (on SQLite: h-shared's part).

def fifty_against_room_for_ten(gateway, user: str) -> None:
    """The quota tests' invariant (tests/e2e/test_quotas.py), the 50 turns spread over
    the workers."""
    slow = {**HI, "metadata": {"scripted_delay_ms": "3000"}}
    rids = [uuid.uuid4().hex for _ in range(50)]
    from concurrent.futures import ThreadPoolExecutor

    def one(rid: str) -> HttpReply:
        return gateway.request("POST", f"/v1/responses?user_id={user}", slow, headers={"X-Request-ID": rid},
                               timeout=60)

    with ThreadPoolExecutor(50) as pool:
        replies = list(pool.map(one, rids))
    admitted = [reply.json() for reply in replies if reply.status == 200]
    assert len(admitted) == 10, [reply.status for reply in replies]
    assert {reply.status for reply in replies if reply.status != 200} == {429}
    used = sum(r["usage"]["input_tokens"] + r["usage"]["output_tokens"] for r in admitted)
    assert len({pid_of(gateway, rid) for rid in rids}) == 2, "the turns did not reach both workers"
    wait_until(lambda: gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"] == 1000 - used,
               "the balance to settle", timeout=30)


def started_with_quota(workers, upstream, tmp_path, postgres=None):
    if postgres is not None:
        storage: dict = {"postgres": postgres.new_database()}
    else:
        storage = {"sqlite": {"db_path": str(tmp_path / f"gateway-{time.monotonic_ns()}.db")}}
    return workers(upstream, database=storage, quota_handlers={**storage, "limiters": [DAILY]})


def test_the_quota_invariant_across_workers(workers, upstream, tmp_path):
    fifty_against_room_for_ten(started_with_quota(workers, upstream, tmp_path), "eve")


@pytest.fixture
def slow_upstream(upstream_with):
    return upstream_with("--delay-ms", "150")


class PinnedStream(Stream):
    """test_interrupt's Stream on the gateway's own port, with the worker that runs it."""

    def __init__(self, gateway, body, user):
        rid = uuid.uuid4().hex
        self.conn = http.client.HTTPConnection("127.0.0.1", gateway.direct_port, timeout=30)
        self.conn.request("POST", f"/v1/streaming_query?user_id={user}", body=json.dumps(body),
                          headers={"Content-Type": "application/json", "X-Request-ID": rid})
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        self.rid, self.gateway = rid, gateway

    @property
    def pid(self) -> int:
        return pid_of(self.gateway, self.rid)


def interrupt_reaches_the_other_worker(gateway) -> None:
    other = None
    for _ in range(40):
        stream = PinnedStream(gateway, {"query": "tell me a long story", "no_tools": True}, "pat")
        request_id = stream.next_event()["data"]["request_id"]
        assert stream.next_event()["event"] == "token"
        if other is None:
            # Pinned to a worker; the stream's own worker is known once it ends.
            other = Pinned(gateway)
        stopped = other.request("POST", "/v1/streaming_query/interrupt?user_id=pat", {"request_id": request_id})
        assert stopped.ok()["interrupted"] is True, stopped.body
        rest = stream.rest()
        assert [event["event"] for event in rest][-1] == "interrupted"
        if stream.pid != other.pid:
            other.close()
            return
    pytest.fail("every stream ran on the worker the interrupts were sent to")


def test_an_interrupt_reaches_the_other_worker(workers, slow_upstream):
    interrupt_reaches_the_other_worker(workers(slow_upstream))


def cancel_reaches_the_other_worker(gateway, upstream) -> None:
    first, second = one_on_each(gateway)
    user = "?user_id=bg-cancel"
    body = first.request("POST", f"/v1/responses{user}", {"input": "long", "background": True,
                                                          "metadata": VERY_SLOW}).ok()
    wait_until(lambda: second.request("GET", f"/v1/responses/{body['id']}{user}").ok()["output_text"] != "",
               "the run's first text", timeout=30)
    cancelled = second.request("POST", f"/v1/responses/{body['id']}/cancel{user}").ok()
    assert cancelled["status"] == "cancelled"
    wait_until(lambda: upstream.open_streams() == 0, "the running worker to close the upstream call", timeout=15)
    assert first.request("GET", f"/v1/responses/{body['id']}{user}").ok()["status"] == "cancelled"
    first.close()
    second.close()


def test_a_background_cancel_reaches_the_other_worker(workers, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    cancel_reaches_the_other_worker(workers(upstream), upstream)


def test_a_worker_that_cannot_start_stops_the_supervisor_with_its_status(upstream, tmp_path):
    """Worker 0 starts alone and fails (the database is unreachable): the supervisor
    exits with its status, its own error line first; nothing is left running."""
    import subprocess

    import yaml

    from tests.support.gateway_proc import GATEWAY_BIN, gateway_config
    from tests.support.processes import free_port

    down = {"host": "127.0.0.1", "port": free_port(), "db": "gw", "user": "gw", "password": "unused-password"}
    config = gateway_config(upstream.url, tmp_path / "unused.db", database={"postgres": down},
                            service={"workers": 2, "port": free_port()})
    (tmp_path / "down.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run([str(GATEWAY_BIN), "serve", "-c", str(tmp_path / "down.yaml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    output = result.stdout + result.stderr
    assert "error: database.postgres: cannot connect to gw@127.0.0.1" in output
    assert "worker 0 (pid" in output and "did not start (exit status 1): stopping" in output
    assert "worker 1 started" not in output


def test_workers_do_not_outlive_a_killed_supervisor(workers):
    """SIGKILL to the supervisor (no chance to pass anything on): the kernel sends each
    worker SIGTERM (PR_SET_PDEATHSIG), and each drains and exits."""
    gateway = workers()
    pids = serving(gateway)
    environ = open(f"/proc/{pids[0]}/environ").read().split("\0")
    metrics_dir = next(entry.split("=", 1)[1] for entry in environ if entry.startswith("PROMETHEUS_MULTIPROC_DIR="))
    gateway.proc.popen.send_signal(signal.SIGKILL)
    gateway.proc.popen.wait(10)

    def gone(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    wait_until(lambda: all(gone(pid) for pid in pids.values()), "the workers to exit", timeout=20)
    assert gateway.messages().count("shutting down: drained in") == 2
    import shutil

    shutil.rmtree(metrics_dir, ignore_errors=True)   # a killed supervisor could not remove it


LONG = {"scripted_delay_ms": "100", "scripted_deltas": "150"}   # ~15 s of text


def a_restart_leaves_the_other_workers_run_alone(gateway) -> None:
    """A worker's start fails what a stopped gateway left unfinished: never what
    another live worker runs."""
    runner, other = one_on_each(gateway)
    user = "?user_id=bg-keep"
    body = runner.request("POST", f"/v1/responses{user}", {"input": "long", "background": True,
                                                           "metadata": LONG}).ok()
    index = next(i for i, pid in serving(gateway).items() if pid == other.pid)
    other.close()
    os.kill(other.pid, signal.SIGKILL)
    wait_until(lambda: serving(gateway).get(index) not in (None, other.pid), "the worker replaced", timeout=60)
    assert runner.request("GET", f"/v1/responses/{body['id']}{user}").ok()["status"] == "in_progress"
    wait_until(lambda: runner.request("GET", f"/v1/responses/{body['id']}{user}").ok()["status"] != "in_progress",
               "the run to end", timeout=60)
    assert runner.request("GET", f"/v1/responses/{body['id']}{user}").ok()["status"] == "completed"
    runner.close()


def test_a_restarted_worker_leaves_the_other_workers_background_run_alone(workers):
    a_restart_leaves_the_other_workers_run_alone(workers())
