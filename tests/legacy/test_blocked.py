"""The query stream of a question a shield blocked, as LCORE writes it: `start`, one
`token` with the shield's message, `end` with no tokens counted and no `turn_complete`;
with `text/plain`, the message alone. (Through `gateway serve`: tests/e2e/test_shields.py.)"""

from __future__ import annotations

import json

from gateway.legacy.blocked import blocked_stream
from gateway.legacy.stream import LegacyStream

MESSAGE = 'I cannot process this request due to "policy" restrictions.'


def events(stream: bytes) -> list[dict]:
    blocks = [block for block in stream.decode().split("\n\n") if block]
    assert all(block.startswith("data: ") for block in blocks)
    return [json.loads(block[len("data: "):]) for block in blocks]


def test_start_one_token_and_end():
    stream = blocked_stream(LegacyStream("c" * 48, "req-1", "p/m"), MESSAGE, {"daily": 40})
    start, token, end = events(stream)
    assert start == {"event": "start", "data": {"conversation_id": "c" * 48, "request_id": "req-1"}}
    assert token["event"] == "token" and token["data"]["id"] == 0 and token["data"]["token"] == MESSAGE
    assert end == {"event": "end", "data": {"referenced_documents": [], "truncated": None, "input_tokens": 0,
                                            "output_tokens": 0}, "available_quotas": {"daily": 40}}


def test_plain_text_is_the_message_alone():
    assert blocked_stream(LegacyStream("c" * 48, "req-1", None, text=True), MESSAGE, {}) == MESSAGE.encode()
