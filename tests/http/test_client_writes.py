"""The bounded writes to a streaming client (gateway/http/client_writes.py), over a
transport that reports what it holds unsent: through `gateway serve` in
tests/e2e/test_slow_reader.py."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from gateway.http.client_writes import ClientWrites, SlowClient
from gateway.turns.run import client_left


class Transport(asyncio.WriteTransport):
    """Holds whatever is written (a client that never reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.held

    def abort(self) -> None:
        self.aborted = True


class Writer:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.sent: list[bytes] = []
        self.drains: list[bool] = []

        self.reader = asyncio.Event()   # set: the client reads (drain() returns once all is taken)

    async def write(self, chunk: bytes, *, drain: bool = True) -> None:
        self.drains.append(drain)
        self.sent.append(chunk)
        self.transport.held += len(chunk)

    async def drain(self) -> None:
        await self.reader.wait()
        self.transport.held = 0


def writes(limit: int = 100, timeout: float = 5.0) -> tuple[ClientWrites, Writer, Transport]:
    transport = Transport()
    writer = Writer(transport)
    return ClientWrites(writer, transport, limit, timeout, "req-1"), writer, transport  # type: ignore[arg-type]


async def test_writes_within_the_bound_go_out_without_waiting_for_the_client():
    client, writer, transport = writes()
    await client.write(b"a" * 60)
    await client.write(b"b" * 40)   # exactly the bound: not over it
    assert writer.sent == [b"a" * 60, b"b" * 40]
    assert writer.drains == [False, False]
    assert not transport.aborted


async def test_a_client_past_the_bound_that_takes_nothing_within_the_timeout_is_cut(caplog: Any):
    client, writer, transport = writes(timeout=0.05)
    await client.write(b"a" * 101)   # goes out: the bound is checked before each write
    with caplog.at_level(logging.WARNING, logger="gateway.http"), pytest.raises(SlowClient) as raised:
        await asyncio.wait_for(client.write(b"b"), 5)
    assert transport.aborted
    # A client that left, for the runner: the turn is abandoned, charged as such.
    assert isinstance(raised.value, ConnectionError) and client_left(raised.value)
    assert "stopped reading: 101 bytes unread, over service.max_client_write_buffer_bytes (100)" in caplog.text
    assert "service.client_drain_timeout_seconds" in caplog.text and "req-1" in caplog.text


async def test_a_client_past_the_bound_that_reads_is_waited_for_not_cut():
    client, writer, transport = writes(timeout=5)
    await client.write(b"a" * 1000)   # one event larger than the bound goes out whole
    write = asyncio.ensure_future(client.write(b"b"))
    await asyncio.sleep(0.05)
    assert not write.done()   # the turn waits for its client
    writer.reader.set()
    await asyncio.wait_for(write, 5)
    assert not transport.aborted and writer.sent[-1] == b"b" and transport.held == 1


async def test_the_end_waits_for_the_client_at_most_the_drain_timeout(caplog: Any):
    client, writer, transport = writes(timeout=0.05)
    transport.held = 64 * 1024   # enough unsent for the transport to pause
    never = asyncio.Event()

    async def write_eof(frames: bytes) -> None:
        await writer.write(frames)
        await never.wait()   # drain() for a client that never reads

    with caplog.at_level(logging.WARNING, logger="gateway.http"), pytest.raises(SlowClient):
        await asyncio.wait_for(client.eof(b"end", write_eof), 5)
    assert transport.aborted
    assert "service.client_drain_timeout_seconds" in caplog.text


async def test_the_end_of_a_client_that_reads_is_written_whole():
    client, writer, transport = writes()
    ended: list[bytes] = []

    async def write_eof(frames: bytes) -> None:
        ended.append(frames)

    await client.eof(b"last", write_eof)
    assert ended == [b"last"] and not transport.aborted


async def test_a_connection_already_closed_is_a_client_that_left():
    client = ClientWrites(None, None, 100, 1.0, "req-2")
    with pytest.raises(ConnectionResetError) as raised:
        await client.write(b"x")
    assert client_left(raised.value)
