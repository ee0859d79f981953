"""The rewriter's fast paths give the same bytes as the full decode → repair → enrich
path (`fast=False`), for every recorded stream and for generated ones, and they are
the paths text deltas take in both dialects; and, as properties (bounded, derandomized),
any split of any recorded stream gives the bytes of the stream read whole, on every
transport's framing, and no bytes and no JSON events make it raise."""

from __future__ import annotations

import json
from typing import Callable

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.legacy.framing import LegacyFraming
from gateway.legacy.stream import LegacyStream
from gateway.streaming import passthrough
from gateway.streaming.enrich import Enricher
from gateway.streaming.framing import SSEFraming
from gateway.streaming.rewriter import StreamRewriter
from gateway.streaming.websocket import WebSocketFraming
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


# -- properties (issue 42: fuzzing in CI, bounded and derandomized) ----------------------

def _framings() -> dict[str, Callable[[], StreamRewriter]]:
    """A rewriter per transport's framing: SSE, the WebSocket's (with a lane), LCORE's query stream."""
    return {
        "sse": lambda: StreamRewriter(Enricher(CONVERSATION, None)),
        "websocket": lambda: StreamRewriter(Enricher(CONVERSATION, None), WebSocketFraming("lane-1")),
        "lcore": lambda: StreamRewriter(Enricher(CONVERSATION, None),
                                        LegacyFraming(LegacyStream("c" * 48, "req-1", "p/m"))),
    }


FRAMINGS = _framings()
BOUNDED = settings(max_examples=100, derandomize=True, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    return [raw[start:stop] for start, stop in zip([0] + points, points + [len(raw)])]


@BOUNDED
@given(name=st.sampled_from(sorted(CAPTURED)), framing=st.sampled_from(sorted(FRAMINGS)),
       ending=st.sampled_from([b"\n", b"\r\n", b"\r"]), data=st.data())
def test_any_split_of_a_recorded_stream_gives_the_same_client_bytes(name, framing, ending, data):
    """However the upstream's body is cut into reads (mid-line, mid-UTF-8 character,
    between CR and LF), the client gets the bytes of the stream read whole, on every
    transport: the fast paths and the `_rest` carry-over never depend on the reads."""
    raw = CAPTURED[name].replace(b"\n", ending)
    # Anywhere, and often where a line or an event ends (a CR, the blank line).
    ends = [index + 1 for index, byte in enumerate(raw) if byte in (10, 13)] or [0]
    cuts = data.draw(st.lists(st.integers(0, len(raw)) | st.sampled_from(ends), max_size=24))
    whole = rewrite_reads([raw], rewriter=FRAMINGS[framing]())
    assert rewrite_reads(_split(raw, cuts), rewriter=FRAMINGS[framing]()) == whole


def _feed_all(rewriter: StreamRewriter, reads: list[bytes]) -> bytes:
    """As the relay does: reads until the terminal event, else close; then settle."""
    out = []
    for read in reads:
        frames, terminal = rewriter.feed(read)
        out.append(frames)
        if terminal is not None:
            return b"".join(out) + rewriter.terminal(terminal, {"daily": 1})
    frames, terminal = rewriter.close()
    out.append(frames)
    if terminal is not None:
        out.append(rewriter.terminal(terminal, {"daily": 1}))
    return b"".join(out)


@BOUNDED
@given(raw=st.binary(max_size=3000), framing=st.sampled_from(sorted(FRAMINGS)),
       cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_arbitrary_bytes_never_crash_the_rewriter(raw, framing, cuts):
    """Whatever the upstream sends (not SSE, cut UTF-8, NULs, stray CRs), the rewriter
    raises nothing: garbage is dropped and the stream ends with a terminal event (the
    upstream's or `response.failed`)."""
    out = _feed_all(FRAMINGS[framing](), _split(raw, cuts))
    assert isinstance(out, bytes) and out   # at least the terminal frame


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3), max_leaves=12)
KEYS = ["type", "sequence_number", "response", "item", "delta", "item_id", "output_index", "content_index",
        "part", "error", "usage", "output", "id", "status", "text", "arguments", "name", "server_label"]
EVENT_TYPES = sorted({*(kind.decode() for kind in passthrough.PASS_THROUGH), "response.created", "response.in_progress", "response.completed",
                      "response.failed", "response.incomplete", "response.output_item.added",
                      "response.output_item.done", "response.content_part.added", "response.content_part.done",
                      "response.output_text.done", "response.mcp_call.failed", "response.mcp_list_tools.failed",
                      "error", "response.queued"})


@st.composite
def json_event(draw) -> bytes:
    """One `data:` block of a JSON value: mostly an object with the keys the rewriter
    reads, each of any JSON type (a `type` that is a number, a `response` that is a list,
    ...), else any JSON value at all."""
    if draw(st.integers(0, 4)) == 0:
        return b"data: " + json.dumps(draw(JSON)).encode()
    event = draw(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6))
    if draw(st.booleans()):
        event["type"] = draw(st.sampled_from(EVENT_TYPES))
    if draw(st.booleans()):
        event["response"] = draw(st.dictionaries(st.sampled_from(KEYS + ["conversation", "previous_response_id"]),
                                                 JSON, max_size=5))
    event_line = draw(st.sampled_from([b"", b"event: " + str(event.get("type")).encode() + b"\n"]))
    return event_line + b"data: " + json.dumps(event).encode()


@BOUNDED
@given(blocks=st.lists(json_event(), min_size=1, max_size=8), framing=st.sampled_from(sorted(FRAMINGS)),
       cuts=st.lists(st.integers(0, 4000), max_size=6))
def test_arbitrary_json_events_never_crash_the_rewriter(blocks, framing, cuts):
    """Events of a known type with fields of the wrong JSON type, in any order, go
    through repair, enrichment and every framing without an exception."""
    raw = b"\n\n".join(blocks) + b"\n\n"
    out = _feed_all(FRAMINGS[framing](), _split(raw, cuts))
    assert isinstance(out, bytes) and out


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
