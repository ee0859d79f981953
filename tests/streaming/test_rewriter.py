"""The rewriter's fast paths give the same bytes as the full decode → repair → enrich
path (`fast=False`), for every recorded stream and for generated ones, and they are
the paths text deltas take in both dialects."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.streaming import passthrough
from gateway.streaming.enrich import Enricher
from gateway.streaming.rewriter import StreamRewriter
from tests.streaming.streams import CONVERSATION, captures, chunks, per_event, rewrite_reads

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


class Counting(StreamRewriter):
    """Records which path each event took."""
    __slots__ = ("runs", "single", "slow")

    def __init__(self) -> None:
        super().__init__(Enricher(CONVERSATION, None))
        self.runs: list[int] = []      # events per run
        self.single = 0                # events framed one by one without a parse
        self.slow: list[str] = []      # types that went through repair and enrichment

    def _run(self, data, pos):
        found = super()._run(data, pos)
        if found is not None:
            self.runs.append(data.count(b"\n\n", pos, found[0]))
        return found

    def _framed(self, match):
        framed = super()._framed(match)
        self.single += framed is not None
        return framed

    def _events(self, event, out):
        self.slow.append(event.type)
        return super()._events(event, out)


@pytest.mark.parametrize("name", ["text-64-llama-stack.sse", "text-64-openai.sse", "text-64-llama-stack.sse as openai"])
def test_text_deltas_take_the_fast_paths_in_both_dialects(name):
    raw = CAPTURED[name]
    bulk = Counting()
    bulk.feed(raw)
    assert bulk.runs == [1, 64] and bulk.single == 0  # content_part.added, then the 64 deltas in one step
    assert "response.output_text.delta" not in bulk.slow and "response.created" in bulk.slow
    paced = Counting()
    for read in per_event(raw):
        paced.feed(read)
    assert paced.runs == [] and paced.single == 65 and paced.slow == bulk.slow  # one regex per read


def test_a_read_of_deltas_is_one_run():
    blocks = CAPTURED["text-64-llama-stack.sse"].split(b"\n\n")
    head, deltas = b"\n\n".join(blocks[:4]) + b"\n\n", b"\n\n".join(blocks[4:68]) + b"\n\n"
    full = StreamRewriter(Enricher(CONVERSATION, None), fast=False)
    full.feed(head)
    rewriter = Counting()
    rewriter.feed(head)
    rewriter.runs, rewriter.single = [], 0
    assert rewriter.feed(deltas) == full.feed(deltas)
    assert rewriter.runs == [64] and rewriter.single == 0


def test_numbers_that_differ_turn_runs_off_and_deltas_go_one_by_one():
    raw = CAPTURED["responses-file-search-stream.sse"]  # Llama Stack skips a number before the tool call
    rewriter = Counting()
    rewriter.feed(raw)
    assert rewriter.single > 0 and "response.output_text.delta" not in rewriter.slow


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

KINDS = sorted(kind.decode() for kind in passthrough.PASS_THROUGH) + [
    "response.output_text.done", "response.output_item.added", "response.function_call_arguments.delta"]
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "output": [],
            "status": "in_progress", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
# Delta text: odd characters, and pieces that spell the keys and framing the patterns look for.
text = st.lists(st.sampled_from(list('ab "\\\n{}:,é\u2028') + [
    '"sequence_number":', ',"type":"response.output_text.delta"}', "\n\ndata: ", "event: "]), max_size=8).map("".join)


@st.composite
def event_block(draw, number: int) -> bytes:
    """One block: a pass-through event (mostly) or a lifecycle one, fields in any order."""
    kind = draw(st.sampled_from(KINDS + ["response.created", "response.in_progress"]))
    fields = [(b'"delta"', orjson.dumps(draw(text))), (b'"item_id"', b'"m"'), (b'"output_index"', b"0")]
    if kind in ("response.created", "response.in_progress"):
        fields = [(b'"response"', orjson.dumps(RESPONSE))]
    sequence = draw(st.sampled_from(["right", "right", "right", "other", "missing", "nested", "null"]))
    if sequence != "missing":
        value = {"right": b"%d" % number, "other": b"%d" % draw(st.integers(0, 99)), "nested": b"%d" % number,
                 "null": b"null"}[sequence]
        fields.append((b'"sequence_number"', value))
    if sequence == "nested":
        fields.append((b'"annotation"', b'{"sequence_number":5}'))
    fields = draw(st.permutations(fields))
    type_field = (b'"type"', orjson.dumps(kind))
    where = draw(st.sampled_from(["first", "last", "middle"]))
    index = {"first": 0, "last": len(fields), "middle": len(fields) // 2}[where]
    fields.insert(index, type_field)
    payload = b"{" + b",".join(key + b":" + value for key, value in fields) + b"}"
    event_line = draw(st.sampled_from([b"", b"", b"event: " + kind.encode() + b"\n", b"event: message\n"]))
    return event_line + b"data: " + payload


@st.composite
def stream(draw) -> bytes:
    blocks = []
    for number in range(draw(st.integers(1, 12))):
        blocks.append(draw(st.one_of(
            event_block(number), event_block(number), event_block(number),
            st.sampled_from([b": keep-alive", b"data: [DONE]", b'data: {"error": {"message": "m"}}', b"data: nope",
                             b"", b"retry: 5"]))))
    if draw(st.booleans()):
        blocks.append(b'data: {"type":"response.completed","sequence_number":99,"response":'
                      + orjson.dumps({**RESPONSE, "status": "completed", "completed_at": 2}) + b"}")  # no clock in the bytes
    raw = b"\n\n".join(blocks) + draw(st.sampled_from([b"\n\n", b"\n", b""]))
    return raw.replace(b"\n", draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"])))


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
    class ObjectForm(Counting):
        def __init__(self) -> None:
            super().__init__()
            self.enricher = Enricher({"id": CONVERSATION}, None)

    bulk = ObjectForm()
    bulk.feed(CAPTURED["text-64-llama-stack.sse"])
    assert bulk.runs == [1, 64] and bulk.single == 0
