"""A background response's recorded frames read back (sans-I/O): slicing after a
sequence number, and the response as the events so far show it."""

from __future__ import annotations

import orjson
import pytest

from gateway.streaming.progress import events, frames_after, progress
from gateway.streaming.sse import frame


def framed(*events_: dict) -> bytes:
    return b"".join(frame(event["type"], orjson.dumps(event)) for event in events_)


BATCH = framed({"type": "a", "sequence_number": 3}, {"type": "b", "sequence_number": 4},
               {"type": "c", "sequence_number": 5})


@pytest.mark.parametrize("after, kept", [(-1, "abc"), (2, "abc"), (3, "bc"), (4, "c"), (5, ""), (9, "")])
def test_frames_after(after, kept):
    assert "".join(event["type"] for event in events(frames_after(3, BATCH, after))) == kept
    assert frames_after(3, BATCH, after).endswith(b"\n\n") or not kept


def test_progress_builds_the_output_so_far():
    created = {"id": "resp_1", "status": "in_progress", "output": []}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    call = {"id": "fc_1", "type": "function_call", "name": "f", "arguments": "", "call_id": "c"}
    first = framed({"type": "response.created", "response": created},
                   {"type": "response.output_item.added", "output_index": 0, "item": call},
                   {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"a":'},
                   {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "1}"})
    second = framed({"type": "response.output_item.done", "output_index": 0, "item": {**call, "arguments": '{"a":1}'}},
                    {"type": "response.output_item.added", "output_index": 1, "item": message},
                    {"type": "response.content_part.added", "output_index": 1, "content_index": 0,
                     "part": {"type": "output_text", "text": ""}},
                    {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Hel"},
                    {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "lo"})
    so_far = progress({"id": "resp_1"}, [first])
    assert so_far["status"] == "in_progress" and so_far["output"][0]["arguments"] == '{"a":1}'
    now = progress({"id": "resp_1"}, [first, second])
    assert now["output"][0]["arguments"] == '{"a":1}'
    assert now["output"][1]["content"] == [{"type": "output_text", "text": "Hello"}]
    final = {"id": "resp_1", "status": "completed", "output": [{"id": "msg_9"}]}
    assert progress({}, [first, second, framed({"type": "response.completed", "response": final})]) == final
