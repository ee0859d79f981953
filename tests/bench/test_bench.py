"""The benchmark's own helpers (bench/, not gateway/): the placement option's CPU lists,
a process's CPU with its children's (a gateway's workers), and the paced load's two
shapes, against a small SSE server on loopback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
from aiohttp import web

from bench import paced, procs


def test_cpu_lists_as_taskset_takes_them():
    assert procs.cpu_set("0") == {0}
    assert procs.cpu_set("0-1") == {0, 1}
    assert procs.cpu_set("2,4-5") == {2, 4, 5}


@pytest.fixture
def placement():
    saved = procs.GATEWAY_CORE, procs.LOAD_CORE
    yield
    procs.GATEWAY_CORE, procs.LOAD_CORE = saved


def test_placement_sets_the_target_and_the_load_cores(placement):
    procs.set_placement("0-1:2-5")
    assert (procs.GATEWAY_CORE, procs.LOAD_CORE) == ("0-1", "2-5")


@pytest.mark.parametrize("bad", ["0", "0:", "a:1", "0-1:1-2"])
def test_a_placement_that_is_not_two_disjoint_lists_is_refused(placement, bad):
    with pytest.raises(SystemExit):
        procs.set_placement(bad)


def test_a_process_cpu_counts_its_childrens(tmp_path):
    # A parent that idles while its child spends 0.5 s of CPU: that is in the parent's figure.
    child = "import time\nwhile time.process_time() < 0.5: pass\ntime.sleep(60)"
    script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    popen = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    proc = procs.Proc("parent", popen, 0, tmp_path / "log")
    try:
        deadline = time.monotonic() + 30
        while proc.cpu_seconds() < 0.5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.cpu_seconds() >= 0.5   # the parent alone spent far less (an interpreter's start)
        assert procs._own_cpu_seconds(proc.pid) < 0.4
    finally:
        proc.stop()


async def _sse_server(events: int, delay: float) -> tuple[web.AppRunner, int]:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(events):
            await response.write(b'data: {"n": %d}\n\n' % index)
            await asyncio.sleep(delay)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/responses", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


@pytest.mark.parametrize("shape", ["waves", "closed"])
def test_the_paced_load_shapes(shape):
    async def main() -> dict:
        runner, port = await _sse_server(events=3, delay=0.01)
        try:
            return await paced.run(port, b"{}", streams=8, seconds=0.3, expected=3, shape=shape)
        finally:
            await runner.cleanup()

    result = asyncio.run(main())
    assert result["bad"] == 0 and result["events"] == 3 * result["streams"]
    assert result["ttfe_p50_ms"] is not None
    if shape == "closed":
        # Eight slots, each starting its next stream as the last ended, until 0.3 s passed.
        assert result["loop_streams"] == result["streams"] - 8 > 0
        assert result["burst_ttfe_p50_ms"] is not None and result["loop_ttfe_p50_ms"] is not None
    else:
        assert result["streams"] % 8 == 0 and result["waves"] == result["streams"] // 8


def test_the_orchestrator_pins_itself_to_the_load_cores(placement):
    before = os.sched_getaffinity(0)
    try:
        procs.LOAD_CORE = str(min(before))
        procs.pin_self()
        assert os.sched_getaffinity(0) == {min(before)}
    finally:
        os.sched_setaffinity(0, before)
