"""The rewriter's fast paths give the same bytes as the full decode → repair → enrich
path (`fast=False`), for every recorded stream and for generated ones, and they are
the paths text deltas take in both dialects."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.streaming.enrich import Enricher
from gateway.streaming.framing import SSEFraming
from gateway.streaming.rewriter import StreamRewriter
from tests.streaming.streams import CONVERSATION, captures, chunks, per_event, rewrite_reads, stream

CAPTURED = captures()
SPLITS = {
    "one read": lambda raw: [raw],
    "1-byte reads": lambda raw: chunks(raw, 1),
    "61-byte reads": lambda raw: chunks(raw, 61),
    "a read per event": per_event,
    "a read per event, CRLF": lambda raw: per_event(raw.replace(b"\n", b"\r\n")),
    "CRLF cut between CR and LF": lambda raw: chunks(raw.replace(b"\n", b"\r\n"), 2),
}


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_recorded_streams_fast_equals_full_path(name, split):
    reads = SPLITS[split](CAPTURED[name])
    assert rewrite_reads(reads) == rewrite_reads(reads, fast=False)


class Counting:
    """SSE's framing, recording which of the rewriter's paths each event took (through
    the public `Framing` protocol)."""

    shows_numbers = True

    def __init__(self) -> None:
        self.sse = SSEFraming()
        self.runs: list[int] = []      # events per run
        self.single = 0                # events framed one by one without a parse
        self.slow: list[str] = []      # types that went through repair and enrichment

    def one(self, parts):
        self.single += 1
        return self.sse.one(parts)

    def run(self, kind, data, start, stop, count):
        self.runs.append(count)
        return self.sse.run(kind, data, start, stop, count)

    def event(self, event, number):
        self.slow.append(event.type)
        return self.sse.event(event, number)

    def framed(self, event):
        return self.sse.framed(event)

    def end(self, terminal, number, available_quotas):
        return self.sse.end(terminal, number, available_quotas)

    def sent(self, numbered):
        return numbered


def counting(conversation=CONVERSATION) -> tuple[StreamRewriter, Counting]:
    paths = Counting()
    return StreamRewriter(Enricher(conversation, None), paths), paths


@pytest.mark.parametrize("name", ["text-64-llama-stack.sse", "text-64-openai.sse", "text-64-llama-stack.sse as openai"])
def test_text_deltas_take_the_fast_paths_in_both_dialects(name):
    raw = CAPTURED[name]
    rewriter, bulk = counting()
    rewriter.feed(raw)
    assert bulk.runs == [1, 64] and bulk.single == 0  # content_part.added, then the 64 deltas in one step
    assert "response.output_text.delta" not in bulk.slow and "response.created" in bulk.slow
    rewriter, paced = counting()
    for read in per_event(raw):
        rewriter.feed(read)
    assert paced.runs == [] and paced.single == 65 and paced.slow == bulk.slow  # one regex per read


def test_a_read_of_deltas_is_one_run():
    blocks = CAPTURED["text-64-llama-stack.sse"].split(b"\n\n")
    head, deltas = b"\n\n".join(blocks[:4]) + b"\n\n", b"\n\n".join(blocks[4:68]) + b"\n\n"
    full = StreamRewriter(Enricher(CONVERSATION, None), fast=False)
    full.feed(head)
    rewriter, paths = counting()
    rewriter.feed(head)
    paths.runs, paths.single = [], 0
    assert rewriter.feed(deltas) == full.feed(deltas)
    assert paths.runs == [64] and paths.single == 0


def test_numbers_that_differ_turn_runs_off_and_deltas_go_one_by_one():
    raw = CAPTURED["responses-file-search-stream.sse"]  # Llama Stack skips a number before the tool call
    rewriter, paths = counting()
    rewriter.feed(raw)
    assert paths.single > 0 and "response.output_text.delta" not in paths.slow


DELTA = b'{"content_index":0,"delta":"hi","item_id":"m","output_index":0,"sequence_number":%s,"type":"response.output_text.delta"}'


@pytest.mark.parametrize("block", [
    # Numbers the gateway must rewrite, or cannot patch in the bytes.
    b"data: " + DELTA % b"7",
    b"data: " + DELTA % b"00",
    b"data: " + DELTA % b"null",
    b'data: {"sequence_number": 0,"type":"response.output_text.delta"}',
    b'data: {"type":"response.output_text.delta","delta":"x"}',
    # A nested key before the real one (the first one is the one patched, both paths).
    b'data: {"type":"response.output_text.annotation.added","annotation":{"sequence_number":3},"sequence_number":0}',
    # Text that spells the keys, and an `event:` line naming something else.
    b'data: {"delta":"\\",\\"sequence_number\\":9,\\"type\\":\\"response.output_text.delta\\"}","sequence_number":0,'
    b'"type":"response.output_text.delta"}',
    b"event: message\ndata: " + DELTA % b"0",
    b'event: response.output_text.delta\ndata: {"type":"response.refusal.delta","sequence_number":0}',
    b"id: 4\ndata: " + DELTA % b"0",
    b"data: " + DELTA % b"0" + b"\ndata: ",
    b": comment",
])
def test_edge_blocks_fast_equals_full_path(block):
    for reads in ([block + b"\n\n" + block + b"\n\n"], per_event(block + b"\n\n" + block + b"\n\n")):
        assert rewrite_reads(reads) == rewrite_reads(reads, fast=False)


# -- generated streams ----------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=stream(), cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_generated_streams_fast_equals_full_path(raw, cuts):
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    reads = [raw[start:stop] for start, stop in zip([0] + points, points + [len(raw)])]
    assert rewrite_reads(reads) == rewrite_reads(reads, fast=False)
    assert rewrite_reads(per_event(raw)) == rewrite_reads(per_event(raw), fast=False)


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_the_object_form_of_conversation_keeps_the_fast_paths(name):
    """OpenAI's `{"id": ...}` (issue 23) is only in response objects: the same bytes as
    the full path, every response object carrying it, and the deltas still one run."""
    raw = CAPTURED[name]
    shown = {"id": CONVERSATION}
    fast = rewrite_reads([raw], conversation=shown)
    assert fast == rewrite_reads([raw], conversation=shown, fast=False)
    assert fast == rewrite_reads(per_event(raw), conversation=shown)
    for block in fast.split(b"\n\n"):
        if block.startswith(b"event: ") and b'"response":{' in block:
            assert orjson.loads(block.split(b"data: ", 1)[1])["response"]["conversation"] == shown
    assert b'"conversation":"' not in fast


def test_object_form_deltas_take_the_same_paths():
    rewriter, bulk = counting({"id": CONVERSATION})
    rewriter.feed(CAPTURED["text-64-llama-stack.sse"])
    assert bulk.runs == [1, 64] and bulk.single == 0


def test_an_event_longer_than_a_read_is_joined_once_and_passed_on_whole():
    # 2 MiB of text in 4 KiB reads: the reads wait unjoined until the one that ends the
    # event (joining at every read copied the event read after read: quadratic, seconds).
    text = "x" * (2 << 20)
    event = b"data: " + orjson.dumps({"content_index": 0, "delta": text, "item_id": "msg_1", "output_index": 0,
                                      "sequence_number": 0, "type": "response.output_text.delta"}) + b"\n\n"
    reads = [event[at:at + 4096] for at in range(0, len(event), 4096)]
    whole = StreamRewriter(Enricher(CONVERSATION, None)).feed(event)[0]
    rewriter = StreamRewriter(Enricher(CONVERSATION, None))
    assert [rewriter.feed(read)[0] for read in reads[:-1]] == [b""] * (len(reads) - 1)
    assert len(rewriter._more) == len(reads) - 2   # the first is the block's start, the rest wait
    assert rewriter.feed(reads[-1])[0] == whole and orjson.loads(whole.split(b"data: ")[1])["delta"] == text
    # A blank line split across two reads still ends the block.
    rewriter = StreamRewriter(Enricher(CONVERSATION, None))
    out = [rewriter.feed(read)[0] for read in (event[:100], event[100:-1], event[-1:])]
    assert out == [b"", b"", whole]


def test_an_event_past_the_largest_the_gateway_buffers_fails_the_stream(monkeypatch):
    from gateway.streaming import sse

    monkeypatch.setattr(sse, "MAX_EVENT_BYTES", 64 * 1024)
    created = b"data: " + orjson.dumps({"type": "response.created", "sequence_number": 0, "response": {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "m", "status": "in_progress",
        "output": []}}) + b"\n\n"
    endless = b'data: {"type":"response.output_text.delta","delta":"' + b"z" * (256 * 1024)
    rewriter = StreamRewriter(Enricher(CONVERSATION, None))
    assert rewriter.feed(created)[0].startswith(b"event: response.created")
    terminal = None
    reads = 0
    for at in range(0, len(endless), 4096):
        frames, terminal = rewriter.feed(endless[at:at + 4096])
        reads += 1
        if terminal is not None:
            break
    assert terminal is not None and reads * 4096 <= 64 * 1024 + 8192   # stopped at the bound, not at the end
    assert terminal.data["type"] == "response.failed"
    assert terminal.data["response"]["error"]["message"] == sse.TOO_LARGE == rewriter.malformed
    assert rewriter.feed(b"more\n\n") == (b"", None)   # nothing after the end
