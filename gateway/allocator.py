"""Give memory back to the operating system once a load has passed.

CPython returns an arena to the OS only when every object in it is gone, and glibc's
malloc keeps freed chunks for reuse, so after a burst the process stays near its peak.
When the gateway goes idle after being busy (or its resident memory grew well past what
it was after the last release), one full collection and `malloc_trim(0)` (glibc: release
the free pages of every heap, not only its top) return what is free. `gateway serve` runs
on glibc's allocator (`PYTHONMALLOC=malloc`, see `__main__._use_system_allocator`), so
freed objects are free pages here rather than partly used CPython arenas: after 1,000
held streams the process goes back to ~3 MiB above its idle size (bench/, memory
scenario). Under load nothing runs: trimming then would only make the next allocations
fault the pages back in. `allocator_env` is what that restart sets, a larger glibc
tcache included.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping

log = logging.getLogger("gateway.memory")

CHECK_EVERY_S = 2.0
IDLE_CPU_SHARE = 0.05   # below this share of a core over a check interval, the process is idle
BUSY_CPU_SHARE = 0.20   # above it, a load is running (a trim is due once it passes)
# A load can be heavy on memory and light on CPU (a thousand slow streams held open):
# resident memory this much above what it was after the last release also makes one due.
GROWN_KIB = 8 * 1024


# glibc keeps up to this many freed chunks of each small size per thread for reuse without
# locking (its default: 7). A turn frees hundreds of objects at a time, which overflow the
# 7 into the slower free path. What the cache holds is not given back by malloc_trim: a
# JSON turn's instructions (bench.callgrind) against the resident memory left after 1,000
# streams closed (bench/'s memory scenario, target +8 MiB): 7: 992k, +3.5 MiB; 16: 979k;
# 32: 975k, +4.9 MiB; 64: +7.2 MiB; 127: 967k, +9.5 MiB.
TCACHE_COUNT = 32


def allocator_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The allocator variables `gateway serve` restarts with; also for what runs it under
    a wrapper that must not be replaced by the restart (bench/)."""
    return {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": with_tcache_count(environ.get("GLIBC_TUNABLES", ""))}


def with_tcache_count(tunables: str) -> str:
    """GLIBC_TUNABLES with the gateway's tcache count, unless the operator set one."""
    if "glibc.malloc.tcache_count=" in tunables:
        return tunables
    ours = f"glibc.malloc.tcache_count={TCACHE_COUNT}"
    return f"{tunables}:{ours}" if tunables else ours


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None elsewhere (musl, macOS): then only the collection runs."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release() -> int | None:
    """Give back what is free; the resident memory (KiB) after it."""
    before = _rss_kib()
    gc.collect()
    trim = _TRIM
    if trim is not None:
        trim(0)
    after = _rss_kib()
    log.debug("a load has passed: resident memory %s -> %s KiB", before, after)
    return after


def _rss_kib() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return None


_TRIM = _malloc_trim()


class LoadEnd:
    """Fed the process's CPU share and resident memory at each interval; says when a load
    has just ended: a busy period, or a growth in memory, followed by an idle interval."""

    def __init__(self) -> None:
        self.due = False
        self.baseline_kib: int | None = None   # resident memory after the last release

    def ended(self, share: float, rss_kib: int | None = None) -> bool:
        if share > BUSY_CPU_SHARE:
            self.due = True
        elif share < IDLE_CPU_SHARE and (self.due or self._grown(rss_kib)):
            self.due = False
            return True
        return False

    def _grown(self, rss_kib: int | None) -> bool:
        if rss_kib is None:
            return False
        if self.baseline_kib is None:
            self.baseline_kib = rss_kib
        return rss_kib > self.baseline_kib + GROWN_KIB


async def release_after_load(check_every: float = CHECK_EVERY_S) -> None:
    """Forever: once a busy period has ended, release memory (once)."""
    watch = LoadEnd()
    cpu = time.process_time()
    while True:
        await asyncio.sleep(check_every)
        used, cpu = time.process_time() - cpu, time.process_time()
        if watch.ended(used / check_every, _rss_kib()):
            after = release()
            # What stays is live (caches, pools): growth is measured from here on.
            watch.baseline_kib = after if after is not None else watch.baseline_kib


async def background(app: object) -> AsyncIterator[None]:
    """An aiohttp cleanup context running `release_after_load` for the app's life."""
    task = asyncio.ensure_future(release_after_load())
    yield
    task.cancel()
