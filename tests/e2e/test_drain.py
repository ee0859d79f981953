"""Graceful drain on SIGTERM (issue 42), through `gateway serve` over raw sockets: the
listener closes at once and `/readiness` answers 503 on a connection already open; a
stream in flight within `service.shutdown_grace_seconds` completes, is charged and
recorded, and the process exits 0; a stream that outlives the grace ends with
`response.failed` and is charged its reservation (the upstream received it and never
reported usage); a WebSocket turn in flight completes, a message sent meanwhile gets
`server_shutdown`, and the socket closes with 1001; a background run and a streaming
query that outlive it end failed (LCORE's `error` event), charged; connections the
kernel had accepted but the gateway had not are served, not reset."""

from __future__ import annotations

import json
import math
import signal
import socket
import sqlite3
import time

import pytest

from tests.support.raw_client import open_websocket, read_until, websocket_text

INITIAL = 10 ** 6
OUTPUT = 99
# ~3 s of text at the scripted upstream's pace.
PACED = {"scripted_delay_ms": "150", "scripted_deltas": "20"}
# Far longer than any grace here.
ENDLESS = {"scripted_delay_ms": "500", "scripted_deltas": "200"}


@pytest.fixture
def draining(gateway_factory, upstream, tmp_path):
    def start(grace: float, target=upstream):
        quotas = str(tmp_path / f"quotas-{time.monotonic_ns()}.db")
        gateway = gateway_factory(target.url, service={"shutdown_grace_seconds": grace},
                                  quota_handlers={"sqlite": {"db_path": quotas}, "output_reservation": OUTPUT,
                                                  "limiters": [{"name": "daily", "type": "user_limiter",
                                                                "initial_quota": INITIAL, "quota_increase": 0,
                                                                "period": "1 day"}]})
        gateway.quota_db = quotas
        return gateway
    return start


def posted(port: int, path: str, body: dict) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (path.encode(), len(data), data))
    return sock


def read_to_end(sock: socket.socket, timeout: float = 60) -> bytes:
    sock.settimeout(timeout)
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk
        if received.endswith(b"0\r\n\r\n"):   # the chunked body's end
            return received


def events(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]


def charged(gateway, user: str) -> int:
    with sqlite3.connect(gateway.quota_db, timeout=10) as db:
        row = db.execute("SELECT available FROM gateway_quota_balances WHERE subject = ?", (user,)).fetchone()
        held = db.execute("SELECT COALESCE(SUM(tokens), 0) FROM gateway_quota_reservations").fetchone()[0]
    assert held == 0, "a reservation was left held"
    return INITIAL - row[0]


def recorded(gateway, response_id: str) -> str | None:
    db_path = gateway.config_path.parent / "gateway.db"
    with sqlite3.connect(db_path, timeout=10) as db:
        row = db.execute("SELECT status FROM gateway_turns WHERE response_id = ?", (response_id,)).fetchone()
    return row[0] if row else None


def exited(gateway, timeout: float = 30) -> int:
    return gateway.proc.popen.wait(timeout)


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_stream_within_the_grace_completes_is_charged_and_recorded(draining):
    gateway = draining(grace=20)
    kept = socket.create_connection(("127.0.0.1", gateway.direct_port))   # a load balancer's pooled connection
    kept.sendall(b"GET /liveness HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_until(kept, b'"alive"', timeout=10)[1]
    stream = posted(gateway.direct_port, "/v1/responses?user_id=dora",
                    {"input": "hello", "stream": True, "max_output_tokens": OUTPUT, "tool_choice": "none",
                     "metadata": PACED})
    head, _ = read_until(stream, b"response.output_text.delta")
    gateway.proc.popen.send_signal(signal.SIGTERM)
    # At once: new connections refused, readiness 503 on the open connection (which then closes).
    deadline = time.monotonic() + 5
    while not refused(gateway.direct_port):
        assert time.monotonic() < deadline, "the gateway still accepts connections while draining"
        time.sleep(0.05)
    kept.sendall(b"GET /readiness HTTP/1.1\r\nHost: x\r\n\r\n")
    reply, _ = read_until(kept, b"}", timeout=10)
    assert reply.startswith(b"HTTP/1.1 503"), reply
    assert b"shutting down" in reply
    assert kept.recv(1) == b""   # then the connection closes
    kept.close()
    # The stream goes on to its end.
    tail = read_to_end(stream)
    stream.close()
    completed = events(head + tail)[-1]
    assert completed["type"] == "response.completed", completed
    assert b"data: [DONE]" in tail
    assert exited(gateway) == 0
    usage = completed["response"]["usage"]
    assert charged(gateway, "dora") == usage["input_tokens"] + usage["output_tokens"] > 0
    assert recorded(gateway, completed["response"]["id"]) == "completed"
    log = gateway.messages()
    assert "shutting down: readiness is 503" in log and "drained in" in log


def test_a_stream_beyond_the_grace_ends_failed_and_is_charged(draining, upstream):
    gateway = draining(grace=1)
    body = {"input": "hello", "stream": True, "max_output_tokens": OUTPUT, "tool_choice": "none",
            "metadata": ENDLESS}
    stream = posted(gateway.direct_port, "/v1/responses?user_id=ezra", body)
    head, _ = read_until(stream, b"response.output_text.delta")
    signalled = time.monotonic()
    gateway.proc.popen.send_signal(signal.SIGTERM)
    tail = read_to_end(stream)
    stream.close()
    ended = time.monotonic() - signalled
    failed = events(head + tail)[-1]
    assert failed["type"] == "response.failed", failed
    assert failed["response"]["error"]["message"] == "The gateway is shutting down."
    assert b"data: [DONE]" in tail
    assert 1 <= ended < 8, ended
    assert exited(gateway) == 0
    # The upstream received the turn and never reported its usage: its reservation.
    reservation = math.ceil(len(json.dumps(body["input"])) / 4) + OUTPUT
    assert charged(gateway, "ezra") == reservation
    assert recorded(gateway, failed["response"]["id"]) is None   # a failed turn is not a turn of its conversation
    assert "the grace period is over" in gateway.messages()


def websocket_messages(sock: socket.socket, until: bytes, timeout: float = 30) -> tuple[list[dict], int | None]:
    """Server frames (unmasked, RFC 6455) until a text message containing `until` or a
    close frame: the text messages, and the close code if the socket closed."""
    sock.settimeout(timeout)
    buffer = b""
    messages: list[dict] = []
    while True:
        while len(buffer) < 2 or len(buffer) < _frame_size(buffer):
            chunk = sock.recv(65536)
            if not chunk:
                return messages, None
            buffer += chunk
        size = _frame_size(buffer)
        frame, buffer = buffer[:size], buffer[size:]
        opcode, payload = frame[0] & 0x0F, frame[size - _payload_length(frame):]
        if opcode == 0x8:
            return messages, int.from_bytes(payload[:2], "big")
        if opcode == 0x1:
            messages.append(json.loads(payload))
            if until in payload:
                return messages, None


def _payload_length(frame: bytes) -> int:
    length = frame[1] & 0x7F
    if length == 126:
        return int.from_bytes(frame[2:4], "big")
    if length == 127:
        return int.from_bytes(frame[2:10], "big")
    return length


def _frame_size(buffer: bytes) -> int:
    length = buffer[1] & 0x7F
    head = 2 + (2 if length == 126 else 8 if length == 127 else 0)
    if len(buffer) < head:
        return head
    return head + _payload_length(buffer)


def test_a_websocket_turn_within_the_grace_completes_then_the_socket_closes_1001(draining):
    gateway = draining(grace=20)
    sock = open_websocket(gateway.direct_port, "/v1/responses?user_id=wren")
    create = {"type": "response.create", "input": "hello", "max_output_tokens": OUTPUT, "tool_choice": "none",
              "metadata": PACED}
    sock.sendall(websocket_text(json.dumps(create).encode()))
    websocket_messages(sock, b"response.output_text.delta")
    gateway.proc.popen.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    sock.sendall(websocket_text(json.dumps({**create, "input": "another"}).encode()))   # refused: shutting down
    messages, code = websocket_messages(sock, b"\x00never")
    kinds = [message["type"] for message in messages]
    assert "response.completed" in kinds, kinds
    refusals = [message for message in messages if message["type"] == "error"]
    assert refusals and all(message["error"]["code"] == "server_shutdown" for message in refusals), refusals
    assert code == 1001
    sock.close()
    assert exited(gateway) == 0
    completed = next(message for message in messages if message["type"] == "response.completed")
    usage = completed["response"]["usage"]
    assert charged(gateway, "wren") == usage["input_tokens"] + usage["output_tokens"]


def test_a_background_run_beyond_the_grace_is_recorded_failed_and_charged(draining):
    gateway = draining(grace=1)
    body = {"input": "hello", "max_output_tokens": OUTPUT, "tool_choice": "none", "background": True,
            "metadata": ENDLESS}
    created = gateway.post("/v1/responses?user_id=bo", body).ok()
    assert created["status"] in ("queued", "in_progress")
    time.sleep(0.5)
    gateway.proc.popen.send_signal(signal.SIGTERM)
    assert exited(gateway) == 0
    db_path = gateway.config_path.parent / "gateway.db"
    with sqlite3.connect(db_path, timeout=10) as db:
        status, response = db.execute("SELECT status, response FROM gateway_background WHERE id = ?",
                                      (created["id"],)).fetchone()
        frames = "".join(row[0] for row in db.execute(
            "SELECT frames FROM gateway_background_events WHERE response_id = ? ORDER BY first_seq",
            (created["id"],)))
    assert status == "failed"
    assert json.loads(response)["error"]["message"] == "The gateway is shutting down."
    assert "response.failed" in frames
    reservation = math.ceil(len(json.dumps(body["input"])) / 4) + OUTPUT
    assert charged(gateway, "bo") == reservation


def test_a_streaming_query_beyond_the_grace_ends_with_lcores_error_event(draining, upstream_with):
    gateway = draining(grace=1, target=upstream_with("--delay-ms", "400"))   # the query API sends no knobs
    stream = posted(gateway.direct_port, "/v1/streaming_query?user_id=lee", {"query": "hello " * 50})
    head, _ = read_until(stream, b'"event": "token"')
    gateway.proc.popen.send_signal(signal.SIGTERM)
    tail = read_to_end(stream)
    stream.close()
    frames = events(head + tail)
    assert frames[-1]["event"] == "error", frames[-2:]
    assert "shutting down" in json.dumps(frames[-1]["data"])
    assert exited(gateway) == 0
    assert charged(gateway, "lee") > 0


def test_connections_waiting_in_the_listen_backlog_are_served_not_reset(draining):
    # Whether the signal or the waiting connections reach the event loop first is the
    # loop's choice; without the backlog taken, the first way resets every one of them.
    gateway = draining(grace=5)
    gateway.proc.popen.send_signal(signal.SIGSTOP)   # the kernel accepts these, the gateway cannot yet
    try:
        waiting = [socket.create_connection(("127.0.0.1", gateway.direct_port), timeout=10) for _ in range(8)]
        for sock in waiting:
            sock.sendall(b"GET /liveness HTTP/1.1\r\nHost: x\r\n\r\n")
        gateway.proc.popen.send_signal(signal.SIGTERM)
    finally:
        gateway.proc.popen.send_signal(signal.SIGCONT)
    for sock in waiting:
        reply, _ = read_until(sock, b"}", timeout=10)
        assert reply.startswith(b"HTTP/1.1 200"), reply
        sock.close()
    assert exited(gateway) == 0
