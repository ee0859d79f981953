"""Responses events → LCORE's legacy stream frames, and the JSON QueryResponse (tables)."""

from __future__ import annotations

import json

import orjson
import pytest

from gateway.legacy.response import query_response
from gateway.legacy.framing import LegacyFraming
from gateway.legacy.stream import LegacyStream
from gateway.streaming.enrich import Enricher
from gateway.streaming.events import Event
from gateway.streaming.rewriter import StreamRewriter

FILE_SEARCH = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
               "results": [{"text": "chunk", "score": 0.5, "file_id": "f1", "filename": "f1",
                            "attributes": {"title": "Guide", "doc_url": "https://d/guide"}}]}
MCP_CALL = {"type": "mcp_call", "id": "mcp_1", "name": "add", "server_label": "calc", "arguments": '{"a": 1}',
            "output": "3", "error": None}
MCP_FAILED = {**MCP_CALL, "id": "mcp_2", "error": "boom", "output": None}


def message(text, kind="output_text"):
    part = {"type": kind, kind if kind == "refusal" else "text": text}
    return {"type": "message", "role": "assistant", "content": [part]}


def response(status, output, **extra):
    return {"id": "resp_1", "status": status, "output": output, "usage": {"input_tokens": 3, "output_tokens": 4},
            **extra}


def decode(data: bytes) -> list[dict]:
    return [json.loads(block[6:]) for block in data.decode().split("\n\n") if block]


def delta(text, number):
    payload = {"content_index": 0, "delta": text, "item_id": "msg_1", "output_index": 0,
               "sequence_number": number, "type": "response.output_text.delta"}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def terminal(kind, body):
    return b"data: " + orjson.dumps({"response": body, "sequence_number": 99, "type": kind}) + b"\n\n"


def run(chunks, end_quotas=None, text=False):
    legacy = LegacyStream("c" * 48, "req-1", "p/m", text=text)
    rewriter = StreamRewriter(Enricher("conv_" + "c" * 48, None), LegacyFraming(legacy))
    out = [legacy.start()]
    for chunk in chunks:
        frames, last = rewriter.feed(chunk)
        out.append(frames)
        if last is not None:
            out.append(rewriter.terminal(last, end_quotas or {"daily": 7}))
    return b"".join(out)


def test_tokens_tools_turn_complete_and_end():
    done = b"data: " + orjson.dumps({"item": FILE_SEARCH, "output_index": 0, "sequence_number": 2,
                                     "type": "response.output_item.done"}) + b"\n\n"
    final = response("completed", [FILE_SEARCH, message('Hi "you"')])
    events = decode(run([delta("Hi ", 1) + done, delta('"you"', 3), terminal("response.completed", final)]))
    assert [e["event"] for e in events] == ["start", "token", "tool_call", "tool_result", "token", "turn_complete",
                                            "end"]
    assert events[1]["data"] == {"id": 0, "token": "Hi "} and events[4]["data"] == {"id": 1, "token": '"you"'}
    assert events[2]["data"] == {"id": "fs_1", "name": "file_search", "args": {"queries": ["q"]},
                                 "type": "file_search_call"}
    assert events[3]["data"]["round"] == 1 and json.loads(events[3]["data"]["content"])["results"]
    assert events[5]["data"] == {"id": 2, "token": 'Hi "you"'}
    assert events[6] == {"event": "end", "data": {
        "referenced_documents": [{"doc_url": "https://d/guide", "doc_title": "Guide", "source": None,
                                  "document_id": "f1"}],
        "truncated": None, "input_tokens": 3, "output_tokens": 4}, "available_quotas": {"daily": 7}}


@pytest.mark.parametrize("status, extra, output, error", [
    ("incomplete", {"incomplete_details": {"reason": "max_output_tokens"}}, [message("Hi")],
     {"status_code": 413, "response": "Prompt is too long",
      "cause": "The input exceeds the context window size of model 'p/m'."}),
    ("incomplete", {"incomplete_details": {"reason": "content_filter"}}, [message("No.", "refusal")],
     {"status_code": 500, "response": "Error while processing query",
      "cause": "The model refused to generate a response due to content policy."}),
])
def test_a_stopped_turn_completes_errs_and_ends(status, extra, output, error):
    events = decode(run([delta("Hi", 0), terminal("response." + status, response(status, output, **extra))]))
    assert [e["event"] for e in events] == ["start", "token", "turn_complete", "error", "end"]
    assert events[2]["data"]["token"] == ("No." if error["status_code"] == 500 else "Hi")
    assert events[3]["data"] == error


@pytest.mark.parametrize("message_, cause", [
    ("scripted upstream failure", "scripted upstream failure"),
    ("context_length_exceeded", "The input exceeds the context window size of model 'p/m'."),
])
def test_a_failed_turn_is_an_error_without_end(message_, cause):
    failed = response("failed", [], error={"code": "server_error", "message": message_})
    events = decode(run([delta("Hi", 0), terminal("response.failed", failed)]))
    assert [e["event"] for e in events] == ["start", "token", "error"]
    assert events[-1]["data"]["cause"] == cause


def test_a_stream_that_just_ends_is_an_error():
    legacy = LegacyStream("c" * 48, "req-1", None)
    rewriter = StreamRewriter(Enricher(None, None), LegacyFraming(legacy))
    rewriter.feed(delta("Hi", 0))
    _, last = rewriter.close()
    assert decode(rewriter.terminal(last, {}))[-1]["event"] == "error"


def test_text_plain():
    done = b"data: " + orjson.dumps({"item": MCP_CALL, "output_index": 0, "sequence_number": 1,
                                     "type": "response.output_item.done"}) + b"\n\n"
    final = response("completed", [FILE_SEARCH, MCP_CALL, message("Héllo")])
    fs_done = b"data: " + orjson.dumps({"item": FILE_SEARCH, "output_index": 0, "sequence_number": 2,
                                        "type": "response.output_item.done"}) + b"\n\n"
    out = run([done, fs_done, delta("Héllo", 3), terminal("response.completed", final)], text=True)
    assert out.decode() == ("[Tool Call: add]\n[Tool Result]\n[Tool Call: file_search]\n[Tool Result]\nHéllo"
                            "\n\n---\n\nGuide: https://d/guide")
    failed = response("failed", [], error={"message": "boom"})
    assert run([terminal("response.failed", failed)], text=True) == \
        b"Status: 500 - Error while processing query - boom"


def test_interrupted_closes_markdown():
    legacy = LegacyStream("c" * 48, "req-1", None)
    legacy.delta(b'"```py\\nx"')
    events = decode(legacy.interrupted())
    assert events == [{"event": "token", "data": {"id": 1, "token": "\n```\n\n*Response stopped by the user.*"}},
                      {"event": "interrupted", "data": {"request_id": "req-1"}}]


def test_query_response():
    body = query_response("c" * 48, {**response("completed", [FILE_SEARCH, MCP_CALL, MCP_FAILED, message("Hi")]),
                                     "available_quotas": {"daily": 1}})
    assert list(body) == ["conversation_id", "response", "rag_chunks", "referenced_documents", "truncated",
                          "input_tokens", "output_tokens", "available_quotas", "tool_calls", "tool_results"]
    assert body["response"] == "Hi" and body["truncated"] is False and body["available_quotas"] == {"daily": 1}
    assert body["rag_chunks"] == [{"content": "chunk", "source": "f1", "score": 0.5,
                                   "attributes": {"title": "Guide", "doc_url": "https://d/guide"}}]
    assert [call["args"] for call in body["tool_calls"]][1] == {"a": 1, "server_label": "calc"}
    assert [(r["status"], r["content"], r["round"]) for r in body["tool_results"]][1:] == \
        [("success", "3", 2), ("failure", "boom", 3)]


def test_engine_framed_deltas():
    from gateway.streaming.events import Framed
    legacy = LegacyStream("c" * 48, "req-1", None)
    rewriter = StreamRewriter(Enricher(None, None), LegacyFraming(legacy))
    framed = Framed("response.output_text.delta", b'event: response.output_text.delta\ndata: {"type":'
                    b'"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"logprobs":[],'
                    b'"delta":"a\\"b","sequence_number":4}\n\n', 4)
    done = Event.build({"type": "response.output_item.done", "item": MCP_CALL, "sequence_number": 5})
    events = decode(rewriter.emit([framed, done]))
    assert events[0] == {"event": "token", "data": {"id": 0, "token": 'a"b'}}
    assert [e["event"] for e in events] == ["token", "tool_call", "tool_result"]


def test_an_engine_stream_keeps_its_response_for_an_interrupted_record():
    """The engine's events skip repair, but the response they name is kept: an
    interrupted stream is recorded under its id (http/query.py)."""
    legacy = LegacyStream("c" * 48, "req-1", None)
    rewriter = StreamRewriter(Enricher(None, None), LegacyFraming(legacy))
    created = Event.build({"type": "response.created", "sequence_number": 0,
                           "response": {"id": "resp_engine", "object": "response", "status": "in_progress",
                                        "output": [], "model": "m", "created_at": 1}})
    assert rewriter.emit([created]) == b""    # no frame of its own: `start` is the sink's
    failed, = rewriter.repairer.fail("interrupted")
    assert failed.data["response"]["id"] == "resp_engine"


def test_openai_dialect_blocks_and_reads_split_anywhere():
    """`event:` lines, `type` first, a delta quoting `"delta":` itself; the same bytes cut
    into reads at every position give the same frames."""
    block = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"m",'
             b'"output_index":0,"content_index":0,"delta":"say \\"delta\\":\\"x\\"","sequence_number":3}\n\n')
    final = response("completed", [message('say "delta":"x"')])
    whole = block + terminal("response.completed", final)
    expected = decode(run([whole]))
    assert expected[1]["data"] == {"id": 0, "token": 'say "delta":"x"'}
    for cut in range(1, len(whole)):
        assert decode(run([whole[:cut], whole[cut:]])) == expected


@pytest.mark.parametrize("status, extra", [("completed", {}), ("failed", {"error": {"message": "boom"}}),
                                           ("incomplete", {"incomplete_details": {"reason": "max_output_tokens"}})])
def test_the_rewriter_numbers_the_legacy_events_its_client_was_sent(status, extra):
    """What the runner's `streamed` hook counts as the stream's events relayed."""
    done = b"data: " + orjson.dumps({"item": MCP_CALL, "output_index": 0, "sequence_number": 1,
                                     "type": "response.output_item.done"}) + b"\n\n"
    legacy = LegacyStream("c" * 48, "req-1", "p/m")
    rewriter = StreamRewriter(Enricher("conv_" + "c" * 48, None), LegacyFraming(legacy))
    out = [legacy.start()]
    for chunk in (delta("Hi", 0), done, delta(" there", 2)):
        out.append(rewriter.feed(chunk)[0])
    _, last = rewriter.feed(terminal(f"response.{status}", response(status, [MCP_CALL, message("Hi there")],
                                                                        **extra)))
    out.append(rewriter.terminal(last, {}))
    assert rewriter.numbered == len(decode(b"".join(out)))
    stopped = LegacyStream("c" * 48, "req-2", None)
    stopped.start()
    stopped.delta(b'"x"')
    assert stopped.events == 2
    stopped.interrupted()   # the closing token and `interrupted`
    assert stopped.events == 4


def _openai_delta(text, number, event_line=True):
    payload = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0,
               "delta": text, "sequence_number": number}
    return (b"event: response.output_text.delta\n" if event_line else b"") + b"data: " + orjson.dumps(payload) + b"\n\n"


@pytest.mark.parametrize("block", [delta, _openai_delta, lambda text, n: _openai_delta(text, n, False)],
                         ids=["type last (Llama Stack)", "event line, type first (OpenAI)", "type first"])
@pytest.mark.parametrize("text", [False, True], ids=["json", "text/plain"])
def test_a_run_of_deltas_in_one_read_is_the_same_tokens_as_one_at_a_time(block, text):
    """Consecutive deltas in one read become their tokens in one step (`_run`): the same
    frames, ids and text as deltas read one by one, an empty delta skipped, escapes kept."""
    texts = ["Hi", "", ' "delta":"q"', " \\n", " there", "é"]
    blocks = [block(piece, number) for number, piece in enumerate(texts)]
    final = response("completed", [message("".join(texts))])
    one_at_a_time = run([*blocks, terminal("response.completed", final)], text=text)
    whole = b"".join(blocks) + terminal("response.completed", final)
    assert run([whole], text=text) == one_at_a_time
    for cut in range(1, len(whole), 7):
        assert run([whole[:cut], whole[cut:]], text=text) == one_at_a_time
    if not text:
        tokens = [event["data"] for event in decode(one_at_a_time) if event["event"] == "token"]
        assert tokens == [{"id": n, "token": piece} for n, piece in enumerate(t for t in texts if t)]


def test_a_delta_block_with_a_second_delta_key_is_read_alone():
    """A block the run's one-`findall` cannot read (a nested `"delta":` string) falls
    back to the block-by-block path: its first delta key is the token's."""
    odd = (b'data: {"content_index":0,"delta":"A","extra":{"delta":"B"},"item_id":"m","output_index":0,'
           b'"sequence_number":1,"type":"response.output_text.delta"}\n\n')
    final = response("completed", [message("xAy")])
    out = decode(run([delta("x", 0) + odd + delta("y", 2) + terminal("response.completed", final)]))
    assert [event["data"]["token"] for event in out if event["event"] == "token"] == ["x", "A", "y"]
