"""`python -m bench.paced PORT BODY_FILE --streams N --seconds S [--shape waves|closed]`: paced streams.

Two load shapes (issue 43: the first event's wait differs between them):

- `waves` (the default): each wave opens N streams at once (as when many users start
  asking together, a burst) and reads them to their end; waves repeat until S seconds
  have passed (one wave with `--seconds 0`). Every stream of a wave starts while the
  gateway is otherwise idle.
- `closed`: a closed loop of N streams: N are opened at once, and each stream's end
  starts the next one on its slot until S seconds have passed (then the slots drain).
  A new stream starts while N - 1 others are relaying events and while the ones that
  just ended are being settled and recorded, as under a steady load of real users.
  The first burst's streams are reported apart (`burst_*`) from the ones the loop
  started (`loop_*`).

Every stream's time to first event (connection made and request written → first `data:`
line) is recorded. Prints one JSON line: streams, events (`data:` lines, `[DONE]`
excluded), bad streams, TTFE percentiles, waves, seconds.

A process of its own with raw asyncio protocols (and uvloop when installed), pinned to
the load core by the benchmark: 256 streams of an event every 20 ms are ~13,000 reads a
second, which a stream-reader client on the same core as the upstream would not keep up
with.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time


class Stream(asyncio.Protocol):
    """One POST, its body counted as it arrives (the server closes the connection after it)."""

    def __init__(self, request: bytes, done: asyncio.Future):
        self.request = request
        self.done = done
        self.started = 0.0
        self.ttfe: float | None = None
        self.tail = b""
        self.events = 0
        self.status_ok = False
        self.head = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.started = time.perf_counter()
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if not self.head:
            self.head = data[:16]
            self.status_ok = data.startswith(b"HTTP/1.1 200")
        # A line split across two reads is found with the previous read's last bytes (and
        # what those bytes held alone was counted with that read).
        window, tail = self.tail + data, self.tail
        found = window.count(b"data: ") - tail.count(b"data: ")
        if found and self.ttfe is None:
            self.ttfe = time.perf_counter() - self.started
        self.events += found - (window.count(b"data: [DONE]") - tail.count(b"data: [DONE]"))
        self.tail = data[-16:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def wave(port: int, request: bytes, streams: int) -> list[Stream]:
    loop = asyncio.get_running_loop()
    protocols = []

    async def one() -> None:
        done = loop.create_future()
        protocol = Stream(request, done)
        protocols.append(protocol)
        try:
            await loop.create_connection(lambda: protocol, "127.0.0.1", port)
            await done
        except OSError:
            pass

    await asyncio.gather(*(one() for _ in range(streams)))
    return protocols


async def closed_loop(port: int, request: bytes, streams: int, seconds: float) -> tuple[list[Stream], list[Stream]]:
    """N slots, each running one stream after another until `seconds` have passed: the
    first stream of every slot starts at once (a burst), each later one when its
    slot's previous stream ended. Returns (the burst's streams, the loop's)."""
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + seconds
    burst: list[Stream] = []
    looped: list[Stream] = []

    async def slot() -> None:
        first = True
        while first or time.perf_counter() < deadline:
            done = loop.create_future()
            protocol = Stream(request, done)
            (burst if first else looped).append(protocol)
            first = False
            try:
                await loop.create_connection(lambda: protocol, "127.0.0.1", port)
                await done
            except OSError:
                pass

    await asyncio.gather(*(slot() for _ in range(streams)))
    return burst, looped


def _ttfe(streams: list[Stream]) -> tuple[float | None, float | None]:
    ttfe = sorted(1e3 * s.ttfe for s in streams if s.ttfe is not None)
    if not ttfe:
        return None, None
    return statistics.median(ttfe), ttfe[int(0.9 * (len(ttfe) - 1))]


async def run(port: int, body: bytes, streams: int, seconds: float, expected: int, shape: str = "waves") -> dict:
    request = (f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    started = time.perf_counter()
    results: list[Stream] = []
    extra: dict = {}
    waves = 0
    if shape == "closed":
        burst, looped = await closed_loop(port, request, streams, seconds)
        results = burst + looped
        waves = 1
        extra["burst_ttfe_p50_ms"], extra["burst_ttfe_p90_ms"] = _ttfe(burst)
        extra["loop_ttfe_p50_ms"], extra["loop_ttfe_p90_ms"] = _ttfe(looped)
        extra["loop_streams"] = len(looped)
    else:
        while True:
            results += await wave(port, request, streams)
            waves += 1
            if time.perf_counter() - started >= seconds:
                break
    p50, p90 = _ttfe(results)
    bad = sum(not s.status_ok or s.events != expected for s in results)
    return {"streams": len(results), "events": sum(s.events for s in results), "bad": bad, "waves": waves,
            "seconds": time.perf_counter() - started, "ttfe_p50_ms": p50, "ttfe_p90_ms": p90, **extra}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.paced", description=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("body_file")
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--expected", type=int, default=-1, help="events a good stream has")
    parser.add_argument("--shape", choices=("waves", "closed"), default="waves",
                        help="waves of N opened at once (default), or a closed loop of N (each end starts the next)")
    args = parser.parse_args()
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    with open(args.body_file, "rb") as f:
        body = f.read()
    print(json.dumps(runner(run(args.port, body, args.streams, args.seconds, args.expected, args.shape))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
