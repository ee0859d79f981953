"""Feeding streams through a `StreamRewriter` the way the relay does, and the streams
the tests feed: recorded captures, in Llama Stack's dialect and converted to OpenAI's."""

from __future__ import annotations

from pathlib import Path

import orjson

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
