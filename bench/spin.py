"""`python -m bench.spin MICROSECONDS serve -c FILE`: the gateway with a known extra CPU
cost per request, to check what the metrics workload reads for a known difference.

Only `bench/run --only metrics --metrics-calibration --metrics-known-cost-us N` uses it,
on one gateway of each calibration pair (the measured runs use the gateway as shipped):
every request the middleware takes first spins for N µs on the CPU (the request id's
maker is wrapped; it is called once per request). A method that reads N µs of a 750 µs
turn as 1 % measures CPU per turn; one that reads it as 4 % amplifies differences
(bench/README.md, "Metrics").
"""

from __future__ import annotations

import sys
from time import perf_counter


def main() -> int:
    seconds = float(sys.argv[1]) / 1e6
    sys.argv = ["gateway", *sys.argv[2:]]
    from gateway.http import middleware

    made = middleware.request_id

    def spinning(header: str | None) -> str:
        until = perf_counter() + seconds
        while perf_counter() < until:
            pass
        return made(header)

    middleware.request_id = spinning
    from gateway.__main__ import main as gateway_main

    return gateway_main()


if __name__ == "__main__":
    sys.exit(main())
