"""When the gateway gives memory back: once, when a busy period has ended; and the
allocator variables `gateway serve` restarts with."""

from __future__ import annotations

import subprocess

import pytest

from gateway import allocator
from gateway.allocator import TCACHE_COUNT, allocator_env, with_tcache_count


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


# -- the restart's tunables ---------------------------------------------------------------

OURS = f"glibc.malloc.tcache_count={TCACHE_COUNT}"


def test_the_tcache_count_is_added_to_the_operators_tunables() -> None:
    assert with_tcache_count("") == OURS
    assert with_tcache_count("glibc.malloc.arena_max=2") == f"glibc.malloc.arena_max=2:{OURS}"


def test_an_operators_own_tcache_count_is_kept() -> None:
    assert with_tcache_count("glibc.malloc.tcache_count=7") == "glibc.malloc.tcache_count=7"
    assert with_tcache_count("glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0") == \
        "glibc.malloc.arena_max=2:glibc.malloc.tcache_count=0"


def test_glibc_applies_every_tunable_of_the_composed_value() -> None:
    """The dynamic loader lists the values it took from GLIBC_TUNABLES."""
    listed = subprocess.run(["/lib64/ld-linux-x86-64.so.2", "--list-tunables"], capture_output=True, text=True,
                            env={"GLIBC_TUNABLES": with_tcache_count("glibc.malloc.arena_max=2")}, check=True).stdout
    values = dict(line.split(": ", 1) for line in listed.splitlines() if ": " in line)
    assert values["glibc.malloc.tcache_count"].startswith(f"{TCACHE_COUNT:#x} ")
    assert values["glibc.malloc.arena_max"].startswith("0x2 ")


def test_the_restart_and_the_bench_wrappers_share_one_environment() -> None:
    assert allocator_env({}) == {"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": OURS}
    assert allocator_env({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"})["GLIBC_TUNABLES"] == \
        "glibc.malloc.tcache_count=7"
