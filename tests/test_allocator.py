"""When the gateway gives memory back: once, when a busy period has ended."""

from __future__ import annotations

import pytest

from gateway import allocator


@pytest.mark.parametrize("shares, releases", [
    ([0.0, 0.01, 0.0], [False, False, False]),          # never busy: nothing to give back
    ([0.9, 0.9, 0.01, 0.01], [False, False, True, False]),  # once, when the load has passed
    ([0.9, 0.1, 0.01], [False, False, True]),           # tailing off is not idle yet
    ([0.9, 0.01, 0.9, 0.0], [False, True, False, True]),
])
def test_release_once_after_each_busy_period(shares, releases):
    watch = allocator.LoadEnd()
    assert [watch.ended(share) for share in shares] == releases


def test_release_runs_without_error():
    allocator.release()  # a collection, and malloc_trim where glibc has it


def test_a_load_heavy_on_memory_and_light_on_cpu_ends_too():
    watch = allocator.LoadEnd()
    mib = 1024
    # Never busy by CPU: a thousand slow streams held open, then closed.
    states = [(0.01, 70 * mib), (0.15, 80 * mib), (0.15, 95 * mib), (0.01, 94 * mib), (0.01, 94 * mib)]
    assert [watch.ended(share, rss) for share, rss in states] == [False, False, False, True, True]
    watch.baseline_kib = 75 * mib  # what stayed after the release
    assert not watch.ended(0.01, 80 * mib) and watch.ended(0.01, 84 * mib)
