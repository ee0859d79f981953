"""How background responses end when nobody finished them (sans-I/O parts): the
cancelled and interrupted terminal events carry the output so far and validate
against the `openai` types."""

from __future__ import annotations

import orjson
import pytest

from gateway.background.runs import INTERRUPTED, cancelled_event, first_response, interrupted_event, last_response
from gateway.streaming.sse import frame
from tests.support.openai_shapes import validate_event

CREATED = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "background": True,
           "model": "m", "output": [], "tools": [], "tool_choice": "auto", "parallel_tool_calls": True,
           "conversation": "conv_1", "error": None, "incomplete_details": None}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}


def framed(*events: dict) -> bytes:
    return b"".join(frame(event["type"], orjson.dumps({**event, "sequence_number": n}))
                    for n, event in enumerate(events))


BATCH = framed({"type": "response.created", "response": CREATED},
               {"type": "response.output_item.added", "output_index": 0, "item": MESSAGE},
               {"type": "response.content_part.added", "output_index": 0, "content_index": 0, "item_id": "msg_1",
                "part": {"type": "output_text", "text": "", "annotations": []}},
               {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": "msg_1",
                "delta": "Half an ans", "logprobs": []})


def test_first_and_last_response_of_frames():
    assert first_response(BATCH) == CREATED
    final = {**CREATED, "status": "completed"}
    assert last_response(BATCH + framed({"type": "response.completed", "response": final})) == final


@pytest.mark.parametrize("make, kind, status", [
    (cancelled_event, "response.incomplete", "cancelled"),
    (interrupted_event, "response.failed", "failed"),
])
def test_an_unfinished_response_ends_with_its_output_so_far(make, kind, status):
    event = make(CREATED, [BATCH])
    assert event.type == kind
    response = event.data["response"]
    assert response["status"] == status and response["output"][0]["content"][0]["text"] == "Half an ans"
    assert response["error"] == (None if status == "cancelled" else {"code": "server_error", "message": INTERRUPTED})
    validate_event({**event.data, "sequence_number": 4})
