"""A client that sends a streamed turn and never reads its answer (issue 42), through
`gateway serve` over raw sockets with a small SO_RCVBUF, against the scripted upstream
streaming far more than the sockets can buffer: the gateway cuts it once what it holds
unsent for that connection stayed past `service.max_client_write_buffer_bytes` for
`service.client_drain_timeout_seconds` (1 s here), says why in
its log, abandons the turn (charged its reservation, as when a client leaves: the
upstream reports usage only at the end) and closes the upstream stream; its memory
stays bounded. A client that reads, however long its answer, is not cut. A background
response's follower that never reads is cut too; its run goes on.

On the old code the writer waited in aiohttp's `drain()` for as long as the client
held its connection open: no log line, the upstream stream held, nothing charged."""

from __future__ import annotations

import json
import math
import socket
import sqlite3
from pathlib import Path
from typing import Callable

import pytest

from tests.support.raw_client import open_stream, open_websocket, read_until, wait_until, websocket_text

INITIAL = 10 ** 9
OUTPUT = 99
BOUND = 256 * 1024
TEXT = "y" * 400
# Each text delta is one SSE event of a few hundred bytes: tens of MB in all, far more
# than the loopback sockets buffer (a few MB) and the bound together.
DELTAS = "200000"
CUT = "stopped reading"


@pytest.fixture(scope="module")
def gateway(gateway_factory, upstream, tmp_path_factory):
    quotas = str(tmp_path_factory.mktemp("slow") / "quotas.db")
    gateway = gateway_factory(upstream.url, service={
        "host": "127.0.0.1", "port": 8080, "access_log": False, "max_client_write_buffer_bytes": BOUND,
        "client_drain_timeout_seconds": 1},
        quota_handlers={"sqlite": {"db_path": quotas}, "output_reservation": OUTPUT,
                        "limiters": [{"name": "daily", "type": "user_limiter", "initial_quota": INITIAL,
                                      "quota_increase": 0, "period": "1 day"}]})
    gateway.quota_db = quotas
    return gateway


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def balance(gateway, user: str) -> int:
    return gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def nothing_reserved(gateway) -> bool:
    with sqlite3.connect(gateway.quota_db, timeout=10) as db:
        return db.execute("SELECT COALESCE(SUM(tokens), 0) FROM gateway_quota_reservations").fetchone()[0] == 0


def turn(**extra) -> dict:
    return {"input": TEXT, "max_output_tokens": OUTPUT, "tool_choice": "none",
            "metadata": {"scripted_deltas": DELTAS}, **extra}


def reservation() -> int:
    """What `turn()` reserves: its input's JSON characters over 4, rounded up, and its output cap."""
    return math.ceil((len(TEXT) + 2) / 4) + OUTPUT


def cuts(gateway) -> int:
    return gateway.messages().count(CUT)


def never_read(gateway, upstream, connect: Callable[[], socket.socket], user: str) -> None:
    """The client (`connect()`: the turn sent) reads nothing: the gateway cuts it, logs
    why, settles the turn as abandoned and closes the upstream stream, its memory
    bounded meanwhile."""
    already, before, had = cuts(gateway), rss_kib(gateway.proc.popen.pid), balance(gateway, user)
    sock = connect()
    try:
        wait_until(lambda: cuts(gateway) == already + 1, "the gateway to cut the client that stopped reading", timeout=60)
        wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
        wait_until(lambda: nothing_reserved(gateway), "the reservation to be settled")
        grown = rss_kib(gateway.proc.popen.pid) - before
    finally:
        sock.close()
    line = [line for line in gateway.messages().splitlines() if CUT in line][-1]
    assert "WARNING" in line and "max_client_write_buffer_bytes" in line, line
    assert had - balance(gateway, user) == reservation()
    # The answer was tens of MB; the gateway held at most the bound and a read's frames.
    assert grown < 24 * 1024, f"RSS grew by {grown} KiB"


@pytest.fixture(autouse=True)
def one_at_a_time(gateway, upstream):
    """Each test's upstream stream is the only one (they count open streams)."""
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")


def test_a_reading_client_with_an_answer_far_past_the_bound_is_not_cut(gateway, upstream):
    sock = open_stream(gateway.direct_port, turn(metadata={"scripted_deltas": "20000"}),
                       receive_buffer=4096)
    try:
        head, done = read_until(sock, b"data: [DONE]", timeout=120)
    finally:
        sock.close()
    assert done and head.startswith(b"HTTP/1.1 200"), head[:200]
    assert CUT not in gateway.messages()


def test_an_sse_client_that_never_reads_is_cut(gateway, upstream):
    # open_stream posts without a user: the noop module's default user.
    never_read(gateway, upstream, lambda: open_stream(gateway.direct_port, turn(), receive_buffer=4096),
               "00000000-0000-0000-0000-000")


def test_a_websocket_client_that_never_reads_is_cut(gateway, upstream):
    def connect() -> socket.socket:
        sock = open_websocket(gateway.direct_port, "/v1/responses?user_id=walter", receive_buffer=4096)
        sock.sendall(websocket_text(json.dumps({"type": "response.create", **turn()}).encode()))
        return sock

    never_read(gateway, upstream, connect, "walter")


def test_a_streaming_query_client_that_never_reads_is_cut(gateway, upstream):
    already = cuts(gateway)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", gateway.direct_port))
    # LCORE's query has no metadata: the trigger-free text is answered with a word per
    # delta, so a long question is a long answer.
    data = json.dumps({"query": "word " * 400_000}).encode()
    sock.sendall(b"POST /v1/streaming_query?user_id=quincy HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    try:
        wait_until(lambda: cuts(gateway) == already + 1, "the gateway to cut the query client", timeout=60)
        wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
        wait_until(lambda: nothing_reserved(gateway), "the reservation to be settled")
    finally:
        sock.close()
    # Abandoned: charged its reservation (at least the question's share and the output's).
    assert INITIAL - balance(gateway, "quincy") >= math.ceil(len(data) / 4)


def test_a_background_follower_that_never_reads_is_cut_and_the_run_goes_on(gateway, upstream):
    already = cuts(gateway)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", gateway.direct_port))
    data = json.dumps(turn(background=True, store=True, stream=True,
                           metadata={"scripted_deltas": "60000"})).encode()
    sock.sendall(b"POST /v1/responses?user_id=bella HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    try:
        wait_until(lambda: cuts(gateway) == already + 1, "the gateway to cut the follower", timeout=60)
    finally:
        sock.close()
    # The run is the gateway's, not its follower's: it runs to its end and is charged the
    # usage its upstream reported (an abandoned turn would be charged its reservation).
    wait_until(lambda: nothing_reserved(gateway), "the run to be settled", timeout=120)
    assert INITIAL - balance(gateway, "bella") > reservation()


def test_no_cut_client_was_an_unhandled_error(gateway):
    log = gateway.log()
    assert "unhandled error" not in log and "Error handling request" not in log, log[-4000:]
