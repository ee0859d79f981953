"""Memory: KiB per open stream on a freshly started gateway, and whether its resident
memory goes back down once a load has passed."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench import sseclient
from bench.procs import Proc, start_gateway
from bench.scenarios import PATH, sse_body

# Slow streams: an event every 200 ms for far longer than the scenario holds them.
HELD_DELAY_MS = 200
SETTLE_S = 8.0  # after the streams close: time for the gateway to notice it is idle and give memory back


@dataclass
class MemoryRun:
    streams: int
    opened: int
    failed: int
    still_open: int
    open_seconds: float
    rss_fresh_kib: int       # just started, before any request
    rss_before_kib: int      # after a warm-up of 32 streams, idle
    rss_open_kib: int        # every stream open
    rss_after_kib: int       # SETTLE_S after they closed

    @property
    def kib_per_stream(self) -> float:
        return (self.rss_open_kib - self.rss_before_kib) / max(self.opened, 1)


async def memory(target_streams: int, workdir: Path, upstream: Proc, dialect: str,
                 service: dict | None = None) -> MemoryRun:
    gateway = start_gateway(workdir, upstream.url, name="gateway-memory", service=service)
    try:
        return await _hold_streams(gateway, target_streams, dialect)
    finally:
        gateway.stop()


async def _hold_streams(gateway: Proc, count: int, dialect: str) -> MemoryRun:
    body = orjson.dumps(sse_body(dialect, HELD_DELAY_MS, deltas=2000))
    rss_fresh = gateway.rss_kib()
    # Warm-up: the code paths, the upstream pool and the database, once, before "before".
    warm = [asyncio.create_task(sseclient.post(gateway.port, PATH, body)) for _ in range(32)]
    await asyncio.sleep(2)
    for task in warm:
        task.cancel()
    await asyncio.gather(*warm, return_exceptions=True)
    await asyncio.sleep(1)
    rss_before = gateway.rss_kib()

    opening = asyncio.Semaphore(64)  # the gateway's listen backlog is 128
    opened = failed = 0
    settled = asyncio.Event()

    async def hold() -> None:
        nonlocal failed
        released = False

        def first_event() -> None:
            nonlocal opened, released
            opened += 1
            released = True
            opening.release()
            if opened + failed == count:
                settled.set()

        await opening.acquire()
        try:
            result = await sseclient.post(gateway.port, PATH, body, on_first_event=first_event)
            if not result.ok or result.ttfe is None:
                raise RuntimeError(f"status {result.status}")
            raise RuntimeError("the stream ended while it should have been held open")
        except asyncio.CancelledError:
            raise
        except Exception:
            if not released:  # one that ended after opening shows in `still_open` instead
                failed += 1
                if opened + failed == count:
                    settled.set()
        finally:
            if not released:
                opening.release()

    started = time.perf_counter()
    tasks = [asyncio.create_task(hold()) for _ in range(count)]
    try:
        await asyncio.wait_for(settled.wait(), timeout=120)
        open_seconds = time.perf_counter() - started
        await asyncio.sleep(1)  # every stream has had a few events relayed by now
        samples = []
        for _ in range(5):
            samples.append(gateway.rss_kib())
            await asyncio.sleep(0.2)
        still_open = sum(not task.done() for task in tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(SETTLE_S)
    return MemoryRun(streams=count, opened=opened, failed=failed, still_open=still_open,
                     open_seconds=open_seconds, rss_fresh_kib=rss_fresh, rss_before_kib=rss_before,
                     rss_open_kib=max(samples), rss_after_kib=gateway.rss_kib())
