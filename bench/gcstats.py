"""`python -m bench.gcstats STATS_FILE serve -c FILE`: the gateway with its garbage collections timed.

Only `bench/run --profile` uses it, on a gateway of its own (the measured runs use the
gateway as shipped). Python 3.11 shows no frame for the cyclic collector, so in a py-spy
profile a collection's time lands on whatever function happened to allocate when it
triggered; this tells how much of the gateway's CPU the collector took. On SIGUSR2 the
cumulative counts, seconds and longest pause per generation are written to STATS_FILE.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
from typing import Any


def main() -> int:
    stats_file = sys.argv[1]
    counts, seconds, longest = [0, 0, 0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        generation, took = info["generation"], time.perf_counter() - started[0]
        counts[generation] += 1
        seconds[generation] += took
        longest[generation] = max(longest[generation], took)

    def dump(*_: object) -> None:
        with open(stats_file + ".tmp", "w") as f:
            json.dump({"counts": counts, "seconds": seconds, "longest": longest}, f)
        os.replace(stats_file + ".tmp", stats_file)

    gc.callbacks.append(timed)
    signal.signal(signal.SIGUSR2, dump)
    sys.argv = ["gateway", *sys.argv[2:]]
    from gateway.__main__ import main as gateway_main

    return gateway_main()


if __name__ == "__main__":
    sys.exit(main())
