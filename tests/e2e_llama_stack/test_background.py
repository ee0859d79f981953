"""Background responses through `gateway serve` in front of a real Llama Stack 0.7.3:
the gateway runs the turn itself, so Llama Stack sees an ordinary streamed turn; poll,
resume with the SDK, continue the conversation, and cancel (Llama Stack's request to
its model is closed)."""

from __future__ import annotations

import pytest

from tests.support.gateway_proc import parse_sse
from tests.support.openai_shapes import validate_response
from tests.support.raw_client import wait_until

from .helpers import checked

pytestmark = pytest.mark.llama_stack


def _final(gw, response_id: str) -> dict:
    found = {}

    def done() -> bool:
        found["r"] = gw.get(f"/v1/responses/{response_id}").ok()
        return found["r"]["status"] not in ("queued", "in_progress")
    wait_until(done, f"{response_id} to end")
    return found["r"]


def test_create_poll_resume_and_continue(gw):
    body = gw.post("/v1/responses", {"input": "Hello from the background", "background": True}).ok()
    assert body["background"] is True and body["status"] in ("queued", "in_progress")
    final = _final(gw, body["id"])
    assert final["status"] == "completed" and final["background"] is True
    assert final["output_text"] == "Scripted reply (turn 1, 1 messages): Hello from the background"
    validate_response({k: v for k, v in final.items() if k != "available_quotas"})
    # Llama Stack kept the response as an ordinary one: never told `background`.
    resumed = list(gw.client().responses.retrieve(body["id"], stream=True, starting_after=1))
    assert resumed[0].sequence_number == 2 and resumed[-1].type == "response.completed"
    assert resumed[-1].response.output_text == final["output_text"]
    whole = checked(parse_sse(gw.get(f"/v1/responses/{body['id']}?stream=true").body))
    assert "response.output_text.done" in [event["type"] for event in whole]  # repaired as any stream
    second = gw.post("/v1/responses", {"input": "And next?", "conversation": body["conversation"]}).ok()
    assert second["output_text"] == "Scripted reply (turn 2, 3 messages): And next?"


def test_cancel_closes_llama_stacks_request(gw, chain):
    wait_until(lambda: chain.scripted.open_streams() == 0, "earlier streams to end")
    body = gw.post("/v1/responses", {"input": "please stall-stream in the background", "background": True}).ok()
    wait_until(lambda: chain.scripted.open_streams() == 1, "Llama Stack to call its model")
    cancelled = gw.post(f"/v1/responses/{body['id']}/cancel").ok()
    assert cancelled["status"] == "cancelled" and cancelled["background"] is True
    # The gateway closed its request to Llama Stack, which closed its own to the model.
    wait_until(lambda: chain.scripted.open_streams() == 0, "the model call to be closed")
    events = checked(parse_sse(gw.get(f"/v1/responses/{body['id']}?stream=true").body))
    assert events[-1]["type"] == "response.incomplete" and events[-1]["response"]["status"] == "cancelled"
