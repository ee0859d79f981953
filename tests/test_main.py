"""`gateway serve`'s restart on glibc's allocator: the tunables it adds."""

from __future__ import annotations

import subprocess

from gateway.__main__ import TCACHE_COUNT, allocator_env, with_tcache_count

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
