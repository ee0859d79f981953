"""The chat stream decoder: text pieces as raw JSON literals, everything else parsed."""

from __future__ import annotations

import orjson
import pytest

from gateway.engine.chat_stream import ChatDecoder

HEAD = b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp",'


def frame(choices: bytes, tail: bytes = b"") -> bytes:
    return b"data: " + HEAD + b'"choices":' + choices + tail + b"}\n\n"


TEXT = b'[{"index":0,"delta":{"content":"he said \\"hi\\"\\n"},"logprobs":null,"finish_reason":null}]'

CASES = [
    ("text piece", frame(TEXT), [[b'"he said \\"hi\\"\\n"']]),
    ("text pieces in a row are one list", frame(TEXT) * 2, [[b'"he said \\"hi\\"\\n"'] * 2]),
    ("text with a null usage after", frame(TEXT, b',"usage":null'), [[b'"he said \\"hi\\"\\n"']]),
    ("role and empty content", frame(b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                                     b'"finish_reason":null}]'), [[b'""']]),
    ("usage object is parsed", frame(TEXT, b',"usage":{"prompt_tokens":1}'), "parsed"),
    ("tool call is parsed", frame(b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c"}]},"logprobs":null,'
                                  b'"finish_reason":null}]'), "parsed"),
    ("finish is parsed", frame(b'[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]'), "parsed"),
    ("reasoning is parsed", frame(b'[{"index":0,"delta":{"reasoning_content":"x"},"logprobs":null,'
                                  b'"finish_reason":null}]'), "parsed"),
    ("done is nothing", b"data: [DONE]\n\n", []),
]


@pytest.mark.parametrize("name, body, expected", CASES, ids=[case[0] for case in CASES])
def test_decode(name, body, expected):
    chunks = ChatDecoder().feed(body)
    if expected == "parsed":
        assert len(chunks) == 1 and isinstance(chunks[0], dict)
        assert chunks[0] == orjson.loads(body[6:-2])
    else:
        assert chunks == expected


def test_split_reads_and_crlf():
    body = frame(TEXT).replace(b"\n", b"\r\n") + frame(b'[]', b',"usage":{"prompt_tokens":3}')
    decoder = ChatDecoder()
    chunks = []
    for start in range(0, len(body), 7):
        chunks += decoder.feed(body[start:start + 7])
    chunks += decoder.close()
    assert chunks[0] == [b'"he said \\"hi\\"\\n"'] and chunks[1]["usage"] == {"prompt_tokens": 3}


def test_a_last_chunk_without_its_blank_line():
    decoder = ChatDecoder()
    assert decoder.feed(frame(b"[]", b',"usage":{"prompt_tokens":3}')[:-2]) == []
    assert decoder.close()[0]["usage"] == {"prompt_tokens": 3}


def test_a_chunk_longer_than_a_read_is_joined_once():
    text = "y" * (1 << 20)
    chunk = (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
             b'"delta":{"content":' + orjson.dumps(text) + b'},"logprobs":null,"finish_reason":null}]}\n\n')
    body = chunk[:-1]
    reads = [body[at:at + 4096] for at in range(0, len(body), 4096)] + [chunk[-1:]]
    decoder = ChatDecoder()
    assert [decoder.feed(read) for read in reads[:-1]] == [[]] * (len(reads) - 1)
    assert len(decoder._more) == len(reads) - 2
    assert decoder.feed(reads[-1]) == [[orjson.dumps(text)]]


def test_a_chunk_past_the_largest_the_gateway_buffers_is_an_error_chunk(monkeypatch):
    from gateway.streaming import sse

    monkeypatch.setattr(sse, "MAX_EVENT_BYTES", 64 * 1024)
    decoder = ChatDecoder()
    endless = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"z" * (256 * 1024)
    out: list = []
    for at in range(0, len(endless), 4096):
        out = decoder.feed(endless[at:at + 4096])
        if out:
            break
    assert out == [{"error": {"message": sse.TOO_LARGE, "code": "server_error"}}]
    assert decoder.malformed == sse.TOO_LARGE
