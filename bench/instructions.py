"""`python -m bench.instructions`: instructions the rewriter executes per relayed event,
counted by `valgrind --tool=callgrind` (deterministic, unlike a timer on this machine).

Each workload rewrites a recorded 64-delta stream (`tests/fixtures/devserver/`, one
per upstream dialect) `REPEAT` times, either as one read (bulk) or one read per event
(paced, as a real model streams), with SSE's framing (`rewriter …`; with `--framings`
also the WebSocket's and LCORE's query stream's: `websocket framing …`, `legacy
framing …`). The naive relay's per-read function
(`bench.relay.relay_events`) runs over the same reads as the reference. Callgrind
dumps its counters whenever the process calls libc's `getppid()`, so one valgrind run
measures every workload: each is bracketed by `os.getppid()` calls, after a warm-up
pass of all of them (caches, interned strings, compiled patterns).

`--json` prints `{workload: instructions per event}`; the guard test
(`tests/streaming/test_instruction_budget.py`) checks them against budgets.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STREAMS = {"llama-stack": ROOT / "tests/fixtures/devserver/text-64-llama-stack.sse",
           "openai": ROOT / "tests/fixtures/devserver/text-64-openai.sse"}
REPEAT = 20
CONVERSATION = "conv_" + "ab" * 24


def _reads(raw: bytes, paced: bool) -> list[bytes]:
    if not paced:
        return [raw]
    blocks = raw.split(b"\n\n")
    return [block + b"\n\n" for block in blocks[:-1]]


def _framing(transport: str) -> Any:
    """A new framing of the transport."""
    if transport == "websocket":
        from gateway.streaming.websocket import WebSocketFraming
        return WebSocketFraming()
    if transport == "legacy":
        from gateway.legacy.framing import LegacyFraming
        from gateway.legacy.stream import LegacyStream
        return LegacyFraming(LegacyStream("c" * 48, "request", "provider/model"))
    raise ValueError(transport)


def _rewriter(reads: list[bytes]) -> Callable[[], None]:
    from gateway.streaming.enrich import Enricher
    from gateway.streaming.rewriter import StreamRewriter

    def run() -> None:
        rewriter = StreamRewriter(Enricher(CONVERSATION, None))
        for read in reads:
            _, terminal = rewriter.feed(read)
            if terminal is not None:
                rewriter.terminal(terminal, {})
                return
        _, terminal = rewriter.close()
        rewriter.terminal(terminal, {})
    return run


def _framed_rewriter(reads: list[bytes], transport: str) -> Callable[[], None]:
    """`_rewriter` with another transport's framing (a function of its own: the SSE
    workloads' code stays as it was measured)."""
    from gateway.streaming.enrich import Enricher
    from gateway.streaming.rewriter import StreamRewriter

    def run() -> None:
        rewriter = StreamRewriter(Enricher(CONVERSATION, None), _framing(transport))
        for read in reads:
            _, terminal = rewriter.feed(read)
            if terminal is not None:
                rewriter.terminal(terminal, {})
                return
        _, terminal = rewriter.close()
        rewriter.terminal(terminal, {})
    return run


def _relay(reads: list[bytes]) -> Callable[[], None]:
    from bench.relay import relay_events

    def run() -> None:
        rest = b""
        for read in reads:
            _, rest = relay_events(rest, read, CONVERSATION)
    return run


def workloads(framings: bool = False) -> dict[str, tuple[Callable[[], None], int]]:
    """name -> (one stream's work, events in that stream); with `framings`, the other
    transports' too (off by default: more workloads in the run move every count by a few
    hundred instructions, and the budgets were measured without them)."""
    found = {}
    for dialect, path in STREAMS.items():
        raw = path.read_bytes()
        events = raw.count(b"\n\n")
        for mode in ("bulk", "paced"):
            reads = _reads(raw, mode == "paced")
            found[f"rewriter {dialect} {mode}"] = (_rewriter(reads), events)
            found[f"naive relay {dialect} {mode}"] = (_relay(reads), events)
            # The same rewriter with the other transports' framings (issue 40).
            for transport in ("websocket", "legacy") if framings else ():
                found[f"{transport} framing {dialect} {mode}"] = (_framed_rewriter(reads, transport), events)
    return found


def inner(framings: bool = False) -> None:
    """Runs under callgrind: warm every workload, then one dump-bracketed part each."""
    chosen = workloads(framings)
    for run, _ in chosen.values():
        run()
        run()
    for run, _ in chosen.values():
        os.getppid()
        for _ in range(REPEAT):
            run()
    os.getppid()


def valgrind() -> str:
    found = shutil.which("valgrind")
    if found is None:
        raise FileNotFoundError("valgrind is not installed (Debian: apt-get install valgrind; "
                                "scripts/ensure-valgrind.sh does it)")
    return found


def measure(framings: bool = False) -> dict[str, float]:
    """Instructions per event for every workload (one valgrind run, ~5 s)."""
    names = list(workloads(framings))
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        # A fixed hash seed: set and dict layouts, and so the instructions, repeat exactly.
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
        subprocess.run([valgrind(), "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}",
                        sys.executable, "-m", "bench.instructions", "--inner", *(["--framings"] if framings else [])],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        parts = {}
        for path in Path(tmp).glob("callgrind.out*"):
            text = path.read_text()
            part = int(re.search(r"^part: (\d+)$", text, re.M)[1])
            parts[part] = int(re.search(r"^totals: (\d+)$", text, re.M)[1])
    # Part 1 is start-up and warm-up; parts 2.. are the workloads in order; the last, exit.
    chosen = workloads(framings)
    return {name: parts[index + 2] / (REPEAT * chosen[name][1]) for index, name in enumerate(names)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print {workload: instructions per event}")
    parser.add_argument("--framings", action="store_true",
                        help="also the WebSocket's and LCORE's query stream's framings over the same reads")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        inner(args.framings)
        return 0
    counts = measure(args.framings)
    if args.json:
        print(json.dumps(counts, indent=1))
        return 0
    print("| workload | instructions per event | gateway / naive relay |\n|---|--:|--:|")
    for name, count in counts.items():
        if name.startswith("rewriter"):
            relay = counts[name.replace("rewriter", "naive relay", 1)]
            print(f"| {name} | {count:,.0f} | {count / relay:.2f} |")
        else:
            print(f"| {name} | {count:,.0f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
