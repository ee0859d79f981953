"""Drive wrk: render a Lua script for a scenario, run it pinned to the load core, parse its result.

wrk (C, one thread, epoll) is the throughput generator because it has to share core 1
with the upstream without becoming what limits the direct baseline; its own CPU time
is measured (RUSAGE_CHILDREN) and reported so that can be checked on every run.
"""

from __future__ import annotations

import asyncio
import json
import resource
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procs

LUA_DIR = Path(__file__).parent / "lua"
RESULT_PREFIX = "BENCH_RESULT "


@dataclass
class WrkResult:
    requests: int                 # completed responses (streams for SSE)
    duration_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: dict[str, int]        # wrk's socket errors and status >= 400
    counters: dict[str, int] = field(default_factory=dict)  # the script's own counters
    cpu_s: float = 0.0            # wrk's own user+system time

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def _lua_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    level = "=" * 4
    assert f"]{level}]" not in text
    return f"[{level}[{text}]{level}]"  # a long string: no escaping to get wrong


def render(scenario: str, constants: dict[str, Any]) -> str:
    """`local NAME = value` lines, then the shared part, then the scenario's script."""
    preamble = "".join(f"local {name} = {_lua_value(value)}\n" for name, value in constants.items())
    return preamble + (LUA_DIR / "common.lua").read_text() + (LUA_DIR / f"{scenario}.lua").read_text()


async def run_wrk(wrk: str, url: str, script: str, *, connections: int, seconds: int,
                  timeout_s: int = 10) -> WrkResult:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="bench-", delete=False) as f:
        f.write(script)
        script_path = f.name
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = await asyncio.create_subprocess_exec(
            "taskset", "-c", procs.LOAD_CORE, wrk, "-t1", f"-c{connections}", f"-d{seconds}s",
            f"--timeout={timeout_s}s", "-s", script_path, url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        Path(script_path).unlink(missing_ok=True)
    text = out.decode(errors="replace")
    line = next((line for line in text.splitlines() if line.startswith(RESULT_PREFIX)), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed (exit {proc.returncode}):\n{text}")
    data = json.loads(line[len(RESULT_PREFIX):])
    errors = {key: int(data.pop(key)) for key in ("connect", "read", "write", "status", "timeout")}
    result = WrkResult(requests=int(data.pop("requests")), duration_s=data.pop("duration_us") / 1e6,
                       p50_ms=data.pop("p50_us") / 1e3, p90_ms=data.pop("p90_us") / 1e3,
                       p99_ms=data.pop("p99_us") / 1e3, errors=errors,
                       cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    data.pop("bytes", None)
    result.counters = {key: int(value) for key, value in data.items()}
    return result
