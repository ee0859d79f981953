"""`python -m bench.mcp_call [--calls N]`: one MCP call's round trip as the engine makes
it (`gateway/engine/mcp.py` `call_tool`: a session of its own, `initialize`, the call,
the session's end) against `bench.mcp_server` (the `add` tool, answering at once), two
ways in one process, in alternating blocks so that a busy machine weighs on both alike:

- `listed`: the session is told the tool as the turn's listing gave it (what the
  engine does): `initialize` then `tools/call`;
- `unlisted`: a plain `mcp` session (the engine before): the `mcp` client lists the
  server's tools before the call to find the output schema it validates against, so
  `initialize`, `tools/list`, `tools/call`.

Reports wall ms and this process's CPU ms per call (medians over the blocks). The
server runs on the load core, this process on the gateway core (`bench/procs.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import procs

BLOCKS = 10


async def _block(server: Any, calls: int, listed: dict[str, Any] | None) -> tuple[float, float]:
    """Wall and CPU ms per call over `calls` sequential calls."""
    from gateway.engine.mcp import _bounded
    from gateway.engine.mcp_session import session

    async def one() -> None:
        async with session(server, None, None if listed is None else {"add": listed}) as opened:
            if listed is not None:
                opened.know("add")  # type: ignore[attr-defined]
            result = await opened.call_tool("add", {"a": 2, "b": 3})
        assert not result.is_error and result.structured_content == {"result": 5}, result

    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await _bounded(server, one())
    return (time.perf_counter() - wall) * 1e3 / calls, (time.process_time() - cpu) * 1e3 / calls


async def measure(url: str, calls: int) -> dict[str, tuple[float, float]]:
    from gateway.engine.mcp import list_tools
    from gateway.engine.mcp_types import McpServer

    server = McpServer("calc", url, {}, 30.0)
    listing = await list_tools(server)
    add = next(tool for tool in listing.tools if tool["name"] == "add")
    listed = {"input_schema": add["input_schema"], "output_schema": listing.output_schemas["add"]}
    results: dict[str, list[tuple[float, float]]] = {"listed": [], "unlisted": []}
    await _block(server, 10, listed)  # warm up: imports, the first connections
    for _ in range(BLOCKS):
        results["listed"].append(await _block(server, calls // BLOCKS, listed))
        results["unlisted"].append(await _block(server, calls // BLOCKS, None))
    return {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
            for name, runs in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per way (default 400)")
    args = parser.parse_args()
    os.sched_setaffinity(0, procs.cpu_set(procs.GATEWAY_CORE))  # where the gateway's MCP client runs
    with tempfile.TemporaryDirectory(prefix="gateway-bench-mcp-") as tmp:
        mcp = procs.start_mcp_server(Path(tmp))
        try:
            figures = asyncio.run(measure(mcp.url + "/mcp", args.calls))
        finally:
            mcp.stop()
    print("| session | MCP requests per call | wall ms per call | client CPU ms per call |")
    print("|---|---|--:|--:|")
    for name, requests in (("unlisted", "initialize, tools/list, tools/call"),
                           ("listed", "initialize, tools/call")):
        wall, cpu = figures[name]
        print(f"| {name} | {requests} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
