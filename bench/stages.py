"""`python -m bench.stages STATS_FILE serve -c FILE`: the gateway with each streamed turn's
way to its first event timestamped (issue 43: why the first event waits longer under a
closed loop than under a burst).

Only for investigating: the measured runs use the gateway as shipped. Wraps, before the
app is built, the `/v1/responses` handler, `TurnService.prepare`, the upstream
conversation create, the upstream stream's opening and the SSE sink's first write, and
the settle of each turn; on SIGUSR2 writes the stages' percentiles since the last dump
to STATS_FILE, as JSON, and starts over: each step's start and end in ms from the
handler's start (`@`), and the settles' own length.
"""

from __future__ import annotations

import contextvars
import json
import os
import signal
import statistics
import sys
import time
from typing import Any


def main() -> int:
    stats_file = sys.argv[1]
    stages: dict[str, list[float]] = {}
    counters = {"settling": 0, "settles_during_prepare": 0, "prepares": 0}
    clock = time.perf_counter
    handler_started: contextvars.ContextVar[float | None] = contextvars.ContextVar("stages", default=None)

    def note(name: str, started: float) -> None:
        stages.setdefault(name, []).append(1e3 * (clock() - started))

    def at(name: str) -> None:
        started = handler_started.get()
        if started is not None:
            note("@ " + name, started)

    class Timed:
        def __init__(self, name: str):
            self.name = name

        def __enter__(self) -> None:
            at(self.name + " starts")

        def __exit__(self, *exc: object) -> None:
            at(self.name + " ends")

    import gateway.http.responses as responses
    import gateway.http.sse as sse
    import gateway.turns.run as run
    import gateway.turns.service as service
    import gateway.upstream.responses_api as responses_api

    from aiohttp import web_protocol

    data_received = web_protocol.RequestHandler.data_received

    first_read: dict[int, float] = {}   # id(protocol): its first bytes read (a connection per stream)

    def stamped(self: Any, data: bytes) -> None:
        first_read.setdefault(id(self), clock())
        data_received(self, data)

    web_protocol.RequestHandler.data_received = stamped  # type: ignore[method-assign]

    handler = responses.create_response

    async def create_response(request: Any) -> Any:
        request["stages_started"] = clock()
        read = first_read.pop(id(request.protocol), None)
        if read is not None:
            note("request's first bytes read -> handler starts", read)
        handler_started.set(request["stages_started"])
        return await handler(request)

    responses.create_response = create_response

    prepare = service.TurnService.prepare

    async def timed_prepare(self: Any, identity: Any, raw: Any, headers: Any, *args: Any, **kwargs: Any) -> Any:
        counters["prepares"] += 1
        settling_before = counters["settling"]
        with Timed("prepare"):
            turn = await prepare(self, identity, raw, headers, *args, **kwargs)
        if counters["settling"] or settling_before:
            counters["settles_during_prepare"] += 1
        return turn

    service.TurnService.prepare = timed_prepare  # type: ignore[method-assign]

    create_conversation = responses_api.UpstreamResponses.create_conversation

    async def timed_create(self: Any) -> Any:
        with Timed("upstream conversation create"):
            return await create_conversation(self)

    responses_api.UpstreamResponses.create_conversation = timed_create  # type: ignore[method-assign]

    enter = responses_api.UpstreamStream.__aenter__

    async def timed_enter(self: Any) -> Any:
        with Timed("upstream stream opening"):
            return await enter(self)

    responses_api.UpstreamStream.__aenter__ = timed_enter  # type: ignore[method-assign]

    start = sse._Socket.start

    async def timed_start(self: Any) -> None:
        at("first event (sink started)")
        await start(self)

    sse._Socket.start = timed_start  # type: ignore[method-assign]

    settle = run.Runner.settle

    async def timed_settle(self: Any, turn: Any, *args: Any, **kwargs: Any) -> Any:
        started = clock()
        counters["settling"] += 1
        try:
            return await settle(self, turn, *args, **kwargs)
        finally:
            counters["settling"] -= 1
            note("settle (record committed)", started)

    run.Runner.settle = timed_settle  # type: ignore[method-assign]

    def dump(*_: object) -> None:
        out: dict[str, Any] = {}
        for name, values in stages.items():
            values.sort()
            out[name] = {"n": len(values), "p50": statistics.median(values),
                         "p90": values[int(0.9 * (len(values) - 1))]}
        out["counters"] = dict(counters)
        with open(stats_file + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(stats_file + ".tmp", stats_file)
        stages.clear()
        counters["settles_during_prepare"] = counters["prepares"] = 0

    signal.signal(signal.SIGUSR2, dump)
    sys.argv = ["gateway", *sys.argv[2:]]
    from gateway.__main__ import main as gateway_main

    return gateway_main()


if __name__ == "__main__":
    sys.exit(main())
