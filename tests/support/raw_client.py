"""A raw HTTP/1.1 client socket, for what client libraries do not do on purpose: stop
reading in the middle of a stream, and go away abruptly.

    sock = open_stream(gateway.direct_port, {"input": "please stall-stream"})
    head, seen = read_until(sock, b"response.in_progress")
    reset(sock)
    wait_until(lambda: upstream.open_streams() == 0, "the upstream stream to be cancelled")
"""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path
from typing import Any, Callable

HEAD_BYTES = 65536


def open_stream(port: int, body: dict[str, Any], receive_buffer: int | None = None) -> socket.socket:
    """POST /v1/responses with `stream: true`; nothing is read yet.

    receive_buffer: a small SO_RCVBUF (set before connecting, so it caps the TCP window)
    makes a client that stops reading push back on the server quickly."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    data = json.dumps({**body, "stream": True}).encode()
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return sock


def read_until(sock: socket.socket, marker: bytes, timeout: float = 60) -> tuple[bytes, bool]:
    """Read until `marker` has arrived; return the first 64 KiB read and whether it came.

    Keeps only a window around the marker, so streams of any size cost no memory."""
    sock.settimeout(timeout)
    head = b""
    window = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return head, False
        if len(head) < HEAD_BYTES:
            head += chunk[:HEAD_BYTES - len(head)]
        window = window[-len(marker):] + chunk
        if marker in window:
            return head, True


def first_event(head: bytes) -> dict[str, Any]:
    """The data of the first SSE event in what was read (the status line and headers skipped)."""
    body = head.split(b"\r\n\r\n", 1)[1]
    return json.loads(body.split(b"data: ", 1)[1].split(b"\n", 1)[0])


def reset(sock: socket.socket) -> None:
    """Go away at once with a TCP reset (SO_LINGER 0), as a client that is killed does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def bigger_than_socket_buffers() -> int:
    """A byte count a loopback connection cannot buffer: more than the kernel lets a TCP
    send buffer grow to (Linux: tcp_wmem's maximum), plus a margin."""
    try:
        send_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        send_max = 4 << 20
    return send_max + (2 << 20)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll until condition() holds; fail naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up after {timeout} s waiting for {what}"
        time.sleep(0.02)


def open_websocket(port: int, path: str = "/v1/responses", receive_buffer: int | None = None) -> socket.socket:
    """A WebSocket upgrade of `path` on a raw socket, its 101 read; nothing else is read.

    receive_buffer: as `open_stream`'s, a client that stops reading pushes back at once."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" % path.encode())
    sock.settimeout(10)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)   # byte by byte: nothing after the head is taken from the socket
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def websocket_text(payload: bytes) -> bytes:
    """One client text frame (FIN), masked with the all-zero key (RFC 6455 allows any key;
    this one leaves the payload as it is, so megabytes cost no Python loop)."""
    size = len(payload)
    if size < 126:
        length = bytes([0x80 | size])
    elif size < 1 << 16:
        length = bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        length = bytes([0x80 | 127]) + struct.pack("!Q", size)
    return b"\x81" + length + b"\x00\x00\x00\x00" + payload
