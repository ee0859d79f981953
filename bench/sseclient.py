"""A small HTTP/1.1 client for the streams wrk cannot time: the time to the first event,
the shape check of one stream, and the 1000 streams held open for the memory scenario.

It is not on the throughput path (wrk is): it runs one probe stream at a time, or
holds streams that send an event every few hundred milliseconds. Raw asyncio streams
keep it cheap on the core it shares with the upstream and wrk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson


@dataclass
class StreamResult:
    status: int
    ttfe: float | None = None        # seconds from the request written to the first `data:` line
    elapsed: float = 0.0             # seconds from the request written to the end of the body
    body: bytes = b""
    events: list[bytes] = field(default_factory=list)  # `data:` payloads, `[DONE]` excluded
    done: bool = False               # the body's last frame is `data: [DONE]`

    @property
    def ok(self) -> bool:
        return self.status == 200


def request_bytes(port: int, path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode() + body


def sse_payloads(body: bytes) -> tuple[list[bytes], bool]:
    """The `data:` payloads of an SSE body, and whether it ended with `data: [DONE]`."""
    payloads = [line[6:] for line in body.split(b"\n") if line.startswith(b"data: ")]
    done = bool(payloads) and payloads[-1] == b"[DONE]"
    return (payloads[:-1] if done else payloads), done


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _chunks(reader: asyncio.StreamReader, headers: dict[bytes, bytes]):
    """The body as it arrives, de-chunked (a `data:` line may straddle two chunks)."""
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        while True:
            size = int((await reader.readline()).split(b";", 1)[0], 16)
            if size == 0:
                await reader.readline()
                return
            chunk = await reader.readexactly(size + 2)
            yield chunk[:-2]
    elif b"content-length" in headers:
        yield await reader.readexactly(int(headers[b"content-length"]))
    else:
        while chunk := await reader.read(65536):
            yield chunk


async def post(port: int, path: str, body: bytes, *,
               on_first_event: Callable[[], Awaitable[None] | None] | None = None) -> StreamResult:
    """POST and read the whole answer, noting when the first `data:` line arrived.

    `on_first_event` runs once the first event is in (the memory scenario counts open
    streams with it); the stream is then read to its end or until the task is cancelled.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        writer.write(request_bytes(port, path, body))
        await writer.drain()
        start = time.perf_counter()
        status, headers = await _read_head(reader)
        result = StreamResult(status)
        received = bytearray()
        async for chunk in _chunks(reader, headers):
            tail = len(received)
            received += chunk
            # Look only at the new bytes (plus a few before them, for a split `data:`).
            if result.ttfe is None and received.find(b"data:", max(0, tail - 5)) >= 0:
                result.ttfe = time.perf_counter() - start
                if on_first_event is not None:
                    maybe = on_first_event()
                    if maybe is not None:
                        await maybe
        result.elapsed = time.perf_counter() - start
        result.body = bytes(received)
        result.events, result.done = sse_payloads(result.body)
        return result
    finally:
        writer.close()


def sequence_problems(events: list[bytes]) -> list[str]:
    """What is wrong with one relayed stream's numbering (gateway streams: 0, 1, 2, ...)."""
    problems = []
    for index, payload in enumerate(events):
        number = orjson.loads(payload).get("sequence_number")
        if number != index:
            problems.append(f"event {index} has sequence_number {number}")
            break
    return problems
