"""CPU accounting around a measured run: each process's CPU seconds from /proc, how busy
each core was, and the work a process finishes after the run (the gateway records turns
in the background: that CPU belongs to the run's requests)."""

from __future__ import annotations

import asyncio
import resource
import time
from dataclasses import dataclass, field

from bench import procs
from bench.procs import CLK_TCK, Proc


def core_busy() -> dict[str, int]:
    """Busy jiffies per core from /proc/stat (everything but idle and iowait)."""
    busy = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *values = line.split()
                numbers = [int(v) for v in values]
                busy[f"core {name[3:]}"] = sum(numbers) - numbers[3] - numbers[4]
    return busy


async def wait_idle(procs: list[Proc], max_seconds: float = 60.0) -> float:
    """Seconds until every process uses under 5 % of a core (over 0.3 s), at most max_seconds."""
    started = time.perf_counter()
    while time.perf_counter() - started < max_seconds:
        before = [proc.cpu_seconds() for proc in procs]
        await asyncio.sleep(0.3)
        if all((proc.cpu_seconds() - cpu) / 0.3 < 0.05 for proc, cpu in zip(procs, before)):
            break
    return time.perf_counter() - started


@dataclass
class Usage:
    """CPU seconds per process (and of this orchestrator, and per core) over one run."""
    wall: float
    cpu: dict[str, float]
    after: dict[str, float] = field(default_factory=dict)  # finishing the run's work once it ended

    def percent(self, name: str) -> float:
        return 100 * self.cpu.get(name, 0.0) / self.wall if self.wall else 0.0

    def total(self, name: str) -> float:
        return self.cpu.get(name, 0.0) + self.after.get(name, 0.0)

    def disturbed(self, on_gateway_core: list[str], on_load_core: list[str]) -> list[str]:
        """A core busier than the processes put on it: something else ran on the machine."""
        found = []
        for cores, names in ((procs.GATEWAY_CORE, on_gateway_core), (procs.LOAD_CORE, on_load_core)):
            ours = sum(self.percent(name) for name in names)
            busy = sum(self.percent(f"core {core}") for core in procs.cpu_set(cores))
            if busy - ours > 10:
                found.append(f"core {cores} {busy:.0f} % busy, the benchmark's processes there {ours:.0f} %")
        return found


class Meter:
    """`async with Meter(procs) as usage:` around a run; after it, waits until the
    processes are idle and adds the CPU they spent finishing (`usage.after`)."""

    def __init__(self, procs: dict[str, Proc]):
        self.procs = procs

    async def __aenter__(self) -> Usage:
        self._cores = core_busy()
        self._wall = time.perf_counter()
        self._start = {name: proc.cpu_seconds() for name, proc in self.procs.items()}
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self._self = usage.ru_utime + usage.ru_stime
        self.usage = Usage(0.0, {})
        return self.usage

    async def __aexit__(self, *exc: object) -> None:
        usage = self.usage
        usage.wall = time.perf_counter() - self._wall
        usage.cpu.update({name: proc.cpu_seconds() - self._start[name] for name, proc in self.procs.items()})
        rusage = resource.getrusage(resource.RUSAGE_SELF)
        usage.cpu["bench"] = rusage.ru_utime + rusage.ru_stime - self._self
        cores = core_busy()
        for name, busy in cores.items():
            usage.cpu[name] = (busy - self._cores.get(name, 0)) / CLK_TCK
        if exc[0] is None:
            at_end = {name: proc.cpu_seconds() for name, proc in self.procs.items()}
            await wait_idle(list(self.procs.values()))
            usage.after = {name: proc.cpu_seconds() - at_end[name] for name, proc in self.procs.items()}
