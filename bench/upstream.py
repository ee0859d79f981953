"""`python -m bench.upstream ARGS`: `python -m gateway.devserver ARGS` without full collections.

The scripted upstream keeps every response it served (up to 100,000) and up to 20,000
conversations in memory. CPython's generation-2 collection walks that whole heap: on
the benchmark's machine it paused the upstream for up to half a second several times
per 10-second run, so the direct baseline varied between 2,500 and 8,000 requests/s
from one run to the next. Those pauses belong to the test double, not to what the
benchmark compares, so the upstream runs with generation-2 collections off (younger
generations still run; a few minutes of cyclic garbage fit in memory easily). The
gateway itself runs unmodified. `bench/run --plain-upstream` uses the devserver as is.
"""

from __future__ import annotations

import gc

from gateway.devserver.__main__ import main

if __name__ == "__main__":
    threshold0, threshold1, _ = gc.get_threshold()
    gc.set_threshold(threshold0, threshold1, 2**31 - 1)
    gc.freeze()  # what is loaded at start-up is never collected either
    main()
