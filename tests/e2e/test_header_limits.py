"""Request heads through `gateway serve` over raw sockets: a flood of oversized and slow
header sections cannot take the process's memory, a header section that does not
arrive in time closes its connection, and the gateway answers normally afterwards.

The gateway is reached on its direct port: these clients misbehave on purpose, and the
recording relay would buffer what they send."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from tests.support.raw_client import wait_until

# The secret-looking prefix every flooded header starts with: none of it may reach the log.
MARKER = b"flood-marker-7c1e"
# What the flood may add to the process's peak resident memory (VmHWM over the VmRSS
# before it). Each connection's head is bounded by aiohttp's per-line bound (64 KiB at
# the default `max_header_bytes`) times 64 headers; before the fix the same flood took
# hundreds of MiB (10 MB lines, 128 of them, held until every header had arrived).
RSS_BOUND_MIB = 64


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\n")
    return sock


def send_quietly(sock: socket.socket, data: bytes) -> bool:
    """Send; False once the gateway has closed the connection (it refused the head)."""
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def oversized(port: int, rounds: int) -> None:
    """Header lines of 8 MiB, a few per connection, connection after connection."""
    line = b"X-Big: " + MARKER + b"A" * (8 << 20) + b"\r\n"
    for _ in range(rounds):
        with connect(port) as sock:
            for _ in range(3):
                if not send_quietly(sock, line):
                    break


def too_many(port: int, held: list[socket.socket]) -> None:
    """A hundred 30 KB headers, sent in batches and never finished: the head stays open."""
    sock = connect(port)
    held.append(sock)
    header = b"X-Many: " + MARKER + b"B" * 30_000 + b"\r\n"
    for _ in range(10):
        if not send_quietly(sock, header * 10):
            return
        time.sleep(0.05)


def read_reply(sock: socket.socket, timeout: float) -> bytes:
    """Everything the gateway sends until it closes the connection or `timeout` passes."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except socket.timeout:
        return received + b"<still open>"
    except OSError:
        pass
    return received


def test_a_header_flood_keeps_memory_bounded(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url)
    pid = gateway.proc.popen.pid
    for _ in range(5):  # warm up: the first requests allocate what every request reuses
        assert gateway.get("/v1/models").status == 200
    before = memory_kib(pid, "VmRSS")
    held: list[socket.socket] = []
    workers = [threading.Thread(target=oversized, args=(gateway.direct_port, 3)) for _ in range(6)]
    workers += [threading.Thread(target=too_many, args=(gateway.direct_port, held)) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    peak = memory_kib(pid, "VmHWM")
    try:
        assert peak - before < RSS_BOUND_MIB * 1024, f"the flood took {(peak - before) >> 10} MiB"
        # Too many headers: refused as soon as the 65th arrives, not held until the head ends.
        for sock in held:
            reply = read_reply(sock, 5)
            assert reply.split(b" ", 2)[1] == b"400", reply[:200]
            assert b"The request carries more than 64 headers." in reply and MARKER not in reply
    finally:
        for sock in held:
            sock.close()
    # The gateway answers normally afterwards, and nothing of a refused header was logged.
    assert gateway.get("/v1/models").status == 200
    assert MARKER.decode() not in gateway.log()


@pytest.fixture(scope="module")
def hurried(gateway_factory, upstream):
    return gateway_factory(upstream.url, service={"header_timeout_seconds": 1})


def trickle(sock: socket.socket, stop: threading.Event) -> None:
    """One header byte every 0.2 s: a connection that never finishes its head."""
    while not stop.is_set() and send_quietly(sock, b"X"):
        time.sleep(0.2)


def test_slow_header_sections_are_closed_after_the_timeout(hurried):
    stop = threading.Event()
    socks = [connect(hurried.direct_port) for _ in range(4)]
    trickles = [threading.Thread(target=trickle, args=(sock, stop)) for sock in socks]
    started = time.monotonic()
    for thread in trickles:
        thread.start()
    try:
        replies = [read_reply(sock, 6) for sock in socks]
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        for sock in socks:
            sock.close()
        for thread in trickles:
            thread.join(5)
    for reply in replies:
        assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
        assert b'"request_timeout"' in reply and reply.endswith(b"}")  # the envelope, then closed
    assert elapsed < 5, elapsed
    assert hurried.get("/v1/models").status == 200
    assert "request headers did not arrive within 1" in hurried.log()


def test_the_timeout_spares_idle_connections_and_slow_bodies(hurried, upstream):
    # An idle keep-alive connection (no byte of a new request yet) stays open.
    idle = socket.create_connection(("127.0.0.1", hurried.direct_port), timeout=10)
    with idle:
        time.sleep(1.6)
        idle.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
        assert read_reply(idle, 10).startswith(b"HTTP/1.1 200 ")
    # A body slower than the header timeout is the body's business, not the head's.
    body = b'{"input": "a slow body"}'
    with socket.create_connection(("127.0.0.1", hurried.direct_port), timeout=10) as slow:
        slow.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        for start in range(0, len(body), 6):
            time.sleep(0.5)
            slow.sendall(body[start:start + 6])
        assert read_reply(slow, 30).startswith(b"HTTP/1.1 200 ")


def test_the_access_line_of_a_refused_header_shows_no_header_value(gateway_factory, upstream):
    logged = gateway_factory(upstream.url, service={"access_log": True, "access_log_format": "text"})
    agent = MARKER.decode() + "U" * 40_000  # over max_header_bytes: 431
    reply = logged.get("/v1/models", headers={"User-Agent": agent, "X-Request-ID": "refused-header"})
    assert reply.status == 431
    wait_until(lambda: "gateway.access: GET /v1/models 431" in logged.log(), "the access line")
    line = next(line for line in logged.log().splitlines() if "gateway.access: GET /v1/models 431" in line)
    assert "request_id=refused-header" in line
    assert "GET /v1/models 431 " in line and MARKER.decode() not in line and len(line) < 400
