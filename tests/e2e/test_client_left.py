"""A client that stops reading in the middle of a long answer and then closes its
connection, through `gateway serve` over raw sockets, on every transport that streams
a turn to a client: SSE (`POST /v1/responses`), the WebSocket and LCORE's
`/v1/streaming_query` (issue 39); and a background response's stream, whose run goes on
without its follower and is charged what it used.

The gateway then holds more than the sockets can buffer for that client (the answer is
larger), and either the close makes a write raise (aiohttp's `drain()` a plain
`ConnectionError`, or a write on the closing transport) or what it holds passes
`service.max_client_write_buffer_bytes` first and the gateway cuts the client
(tests/e2e/test_slow_reader.py): either way the turn is abandoned
and charged what docs/quotas.md promises, its usage if known, else its reservation,
never nothing. In forward mode the upstream reports usage only in its terminal event,
so an abandoned turn is charged its reservation."""

from __future__ import annotations

import json
import math
import socket
import sqlite3

import pytest

from tests.support.raw_client import (bigger_than_socket_buffers, first_event, open_stream, open_websocket,
                                      read_until, reset, wait_until, websocket_text)

INITIAL = 10 ** 9
# The scripted upstream's reply repeats the input: an input larger than the sockets can
# buffer is an answer the gateway cannot finish writing to a client that stops reading.
SIZE = bigger_than_socket_buffers()
OUTPUT = 99   # max_output_tokens: the answer's share of the reservation


@pytest.fixture(scope="module")
def charged(gateway_factory, upstream, tmp_path_factory):
    quotas = str(tmp_path_factory.mktemp("left") / "quotas.db")
    gateway = gateway_factory(upstream.url, service={
        "host": "127.0.0.1", "port": 8080, "access_log": False, "max_request_body_bytes": SIZE + (1 << 20),
        "websocket": {"max_queued_bytes": SIZE + (1 << 20)}},
        quota_handlers={"sqlite": {"db_path": quotas}, "output_reservation": OUTPUT,
                        "limiters": [{"name": "daily", "type": "user_limiter", "initial_quota": INITIAL,
                                      "quota_increase": 0, "period": "1 day"}]})
    gateway.quota_db = quotas
    return gateway


def balance(gateway, user: str) -> int:
    return gateway.get(f"/v1/quotas?user_id={user}").ok()["available_quotas"]["daily"]


def nothing_reserved(gateway) -> bool:
    with sqlite3.connect(gateway.quota_db, timeout=10) as db:
        return db.execute("SELECT COALESCE(SUM(tokens), 0) FROM gateway_quota_reservations").fetchone()[0] == 0


def responses_reservation() -> int:
    """What `{"input": "x" * SIZE, "max_output_tokens": OUTPUT}` reserves: its input's
    JSON characters over 4, rounded up, and its output cap."""
    return math.ceil((SIZE + 2) / 4) + OUTPUT


def stop_reading_then_close(sock: socket.socket, upstream) -> None:
    """Read until a part of the long answer arrived (the gateway is writing it and cannot
    finish), then stop reading and close with the rest unread."""
    assert read_until(sock, b"x" * 4096)[1], "the answer never began"
    sock.close()


def charged_after(gateway, upstream, user: str) -> int:
    """What the user was charged once the abandoned turn ended."""
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be closed")
    wait_until(lambda: nothing_reserved(gateway), "the reservation to be settled")
    return INITIAL - balance(gateway, user)


def test_sse_client_that_stops_reading_and_closes_is_charged(charged, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    sock = open_stream(charged.direct_port, {"input": "x" * SIZE, "max_output_tokens": OUTPUT,
                                             "tool_choice": "none"}, receive_buffer=32 * 1024)
    # open_stream posts to /v1/responses without a user: the noop module's default user.
    stop_reading_then_close(sock, upstream)
    assert charged_after(charged, upstream, "00000000-0000-0000-0000-000") == responses_reservation()


def test_websocket_client_that_stops_reading_and_closes_is_charged(charged, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    sock = open_websocket(charged.direct_port, "/v1/responses?user_id=wanda", receive_buffer=32 * 1024)
    message = {"type": "response.create", "input": "x" * SIZE, "max_output_tokens": OUTPUT, "tool_choice": "none"}
    sock.sendall(websocket_text(json.dumps(message).encode()))
    stop_reading_then_close(sock, upstream)
    assert charged_after(charged, upstream, "wanda") == responses_reservation()


def posted(port: int, path: str, body: dict) -> socket.socket:
    """A POST on a raw socket with a small receive buffer; nothing is read yet."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (path.encode(), len(data), data))
    return sock


def test_streaming_query_client_that_stops_reading_and_closes_is_charged(charged, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    sock = posted(charged.direct_port, "/v1/streaming_query?user_id=quinn", {"query": "x" * SIZE})
    stop_reading_then_close(sock, upstream)
    spent = charged_after(charged, upstream, "quinn")
    # The translated request's input (the query, and whatever LCORE's translation adds)
    # and the operator's output reservation: at least the query's own share.
    assert spent >= math.ceil(SIZE / 4) + OUTPUT


def test_a_background_stream_whose_follower_leaves_runs_on_and_is_charged(charged, upstream):
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    sock = posted(charged.direct_port, "/v1/responses?user_id=bianca", {
        "input": "x" * SIZE, "max_output_tokens": OUTPUT, "tool_choice": "none", "background": True, "store": True,
        "stream": True})
    head, seen = read_until(sock, b"x" * 4096)
    assert seen, "the answer never began"
    response_id = first_event(head)["response"]["id"]
    sock.close()
    # The run is the gateway's, not its follower's: it ends, and is charged its usage.
    final: dict = {}

    def ended() -> bool:
        final.update(charged.get(f"/v1/responses/{response_id}?user_id=bianca").ok())
        return final["status"] not in ("queued", "in_progress")

    wait_until(ended, "the background run to end", timeout=60)
    assert final["status"] == "completed"
    wait_until(lambda: nothing_reserved(charged), "the run to be settled")
    usage = final["usage"]
    assert INITIAL - balance(charged, "bianca") == usage["input_tokens"] + usage["output_tokens"] > 0


def test_no_client_that_left_was_an_unhandled_error(charged):
    """Every way these clients left is a client that left (499), not a fault of ours."""
    log = charged.log()
    assert "unhandled error" not in log and "Error handling request" not in log, log[-4000:]


# A client that leaves while the upstream is silent (it answers only once its client
# goes): the upstream sees its connection closed at once, long before the gateway's own
# `llama_stack.timeout` (30 s in the tests) would close it, on the transports the tests
# above do not cover that way (SSE and the WebSocket: tests/e2e/test_streaming.py,
# tests/e2e/test_websocket.py).

def open_requests(upstream) -> int:
    return int(upstream.get("/_scripted/open").json()["open_requests"])


@pytest.mark.parametrize("path, body", [
    ("/v1/responses?user_id=jason", {"input": "please hang-upstream"}),
    ("/v1/query?user_id=jason", {"query": "please hang-upstream"}),
    ("/v1/streaming_query?user_id=jason", {"query": "please stall-stream"}),
])
def test_a_client_that_leaves_frees_the_silent_upstream_at_once(charged, upstream, path, body):
    wait_until(lambda: open_requests(upstream) == 0, "earlier upstream requests to end")
    sock = posted(charged.direct_port, path, body)
    wait_until(lambda: open_requests(upstream) == 1, "the turn to reach the upstream", timeout=10)
    reset(sock)
    wait_until(lambda: open_requests(upstream) == 0, "the upstream connection to be closed", timeout=5)
    wait_until(lambda: nothing_reserved(charged), "the turn to be settled", timeout=10)
