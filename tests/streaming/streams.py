"""Feeding streams through a `StreamRewriter` the way the relay does, and the streams
the tests feed: recorded captures, in Llama Stack's dialect and converted to OpenAI's,
and generated ones (`stream()`, a hypothesis strategy)."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import strategies as st

from gateway.streaming import passthrough
from gateway.streaming.enrich import Enricher
from gateway.streaming.rewriter import StreamRewriter

FIXTURES = Path(__file__).parents[1] / "fixtures"
CAPTURES = FIXTURES / "llama-stack-0.7.3"
CONVERSATION = "conv_" + "ab" * 24
QUOTAS = {"UserQuotaLimiter": 7}


def rewrite_reads(reads: list[bytes], *, fast: bool = True, previous_response_id: str | None = None,
                  conversation: str | dict | None = CONVERSATION, rewriter: StreamRewriter | None = None) -> bytes:
    """What the client gets when the upstream's body arrives in these reads (through
    `rewriter` when given: the WebSocket one)."""
    rewriter = rewriter or StreamRewriter(Enricher(conversation, previous_response_id), fast=fast)
    out = []
    for read in reads:
        frames, terminal = rewriter.feed(read)
        out.append(frames)
        if terminal is not None:
            return b"".join(out) + rewriter.terminal(terminal, QUOTAS)
    frames, terminal = rewriter.close()
    return b"".join(out) + frames + rewriter.terminal(terminal, QUOTAS)


def chunks(raw: bytes, size: int) -> list[bytes]:
    return [raw[start:start + size] for start in range(0, len(raw), size)]


def per_event(raw: bytes) -> list[bytes]:
    """One read per event, as a paced upstream delivers them."""
    blocks = raw.split(b"\n\n")
    return [block + b"\n\n" for block in blocks[:-1]] + ([blocks[-1]] if blocks[-1] else [])


def rewrite_bytes(raw: bytes, chunk: int = 997, fast: bool = True) -> bytes:
    return rewrite_reads(chunks(raw, chunk), fast=fast)


def as_openai(raw: bytes) -> bytes:
    """A Llama Stack capture framed as OpenAI frames it: `event:` line, `type` first."""
    out = []
    for block in raw.split(b"\n\n"):
        if not block.startswith(b"data: {"):
            out.append(block)
            continue
        event = orjson.loads(block[6:])
        if "type" not in event:
            out.append(block)
            continue
        kind = event.pop("type")
        out.append(b"event: %s\ndata: %s" % (kind.encode(), orjson.dumps({"type": kind, **event})))
    return b"\n\n".join(out)


def captures() -> dict[str, bytes]:
    """Every recorded stream, in both dialects: name -> bytes."""
    found = {}
    for path in sorted(CAPTURES.glob("*.sse")) + sorted((FIXTURES / "devserver").glob("*.sse")):
        raw = path.read_bytes()
        found[path.name] = raw
        if not raw.startswith(b"event:"):
            found[f"{path.name} as openai"] = as_openai(raw)
    return found


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
