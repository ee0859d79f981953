"""LCORE's framing over the rewriter's fast paths gives the same frames as over its full
decode → repair → enrich path (`fast=False`), for every recorded stream, every way of
cutting it into reads and generated streams, in both media types."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.legacy.framing import LegacyFraming
from gateway.legacy.stream import LegacyStream
from gateway.streaming.enrich import Enricher
from gateway.streaming.rewriter import StreamRewriter
from tests.streaming.streams import CONVERSATION, captures, chunks, per_event, stream

CAPTURED = captures()
SPLITS = {"one read": lambda raw: [raw], "61-byte reads": lambda raw: chunks(raw, 61), "a read per event": per_event,
          "CRLF cut between CR and LF": lambda raw: chunks(raw.replace(b"\n", b"\r\n"), 2)}


def legacy_reads(reads: list[bytes], *, fast: bool = True, text: bool = False) -> tuple[bytes, int]:
    """The client's bytes and the events counted as sent."""
    legacy = LegacyStream("c" * 48, "req-1", "p/m", text=text)
    rewriter = StreamRewriter(Enricher(CONVERSATION, None), LegacyFraming(legacy), fast=fast)
    out = [legacy.start()]
    for read in reads:
        frames, terminal = rewriter.feed(read)
        out.append(frames)
        if terminal is not None:
            break
    else:
        frames, terminal = rewriter.close()
        out.append(frames)
    assert terminal is not None
    out.append(rewriter.terminal(terminal, {"daily": 7}))
    return b"".join(out), rewriter.numbered


@pytest.mark.parametrize("text", [False, True], ids=["json", "text/plain"])
@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_recorded_streams_fast_equals_full_path(name, split, text):
    reads = SPLITS[split](CAPTURED[name])
    fast = legacy_reads(reads, text=text)
    assert fast == legacy_reads(reads, fast=False, text=text)
    if not text and b"response.output_text.delta" in CAPTURED[name]:
        assert b'"event": "token"' in fast[0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=stream(), cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_generated_streams_fast_equals_full_path(raw, cuts):
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    reads = [raw[start:stop] for start, stop in zip([0] + points, points + [len(raw)])]
    assert legacy_reads(reads) == legacy_reads(reads, fast=False)
    assert legacy_reads(per_event(raw)) == legacy_reads(per_event(raw), fast=False)
