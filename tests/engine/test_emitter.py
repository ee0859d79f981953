"""The emitter's stop: a stream stopped by its client keeps what it had produced."""

from __future__ import annotations

from gateway.engine.response import new_response
from tests.engine.fakes import emitter


def test_a_stopped_response_is_incomplete_with_its_partial_answer():
    the_emitter = emitter()
    the_emitter.start()
    the_emitter.text("Once upon ")
    the_emitter.text("a time")
    the_emitter.take()
    the_emitter.stop("interrupted")
    response = the_emitter.response
    assert response["status"] == "incomplete" and response["incomplete_details"] == {"reason": "interrupted"}
    assert response["usage"] is None
    message, = response["output"]
    assert message["status"] == "incomplete"
    assert message["content"][0]["text"] == "Once upon a time"
    assert the_emitter.take() == []   # nobody reads a stopped stream: no events are left queued


def test_a_stop_before_any_output_keeps_an_empty_incomplete_response():
    the_emitter = emitter()
    the_emitter.start()
    the_emitter.stop("interrupted")
    assert the_emitter.response["status"] == "incomplete" and the_emitter.response["output"] == []


def test_a_new_response_echoes_the_settings_applied():
    nulls = new_response("resp_1", "m", {"parallel_tool_calls": None, "tool_choice": None}, None, [])
    assert nulls["parallel_tool_calls"] is True and nulls["tool_choice"] == "auto"
    asked = new_response("resp_1", "m", {"parallel_tool_calls": False, "tool_choice": "none"}, None, [])
    assert asked["parallel_tool_calls"] is False and asked["tool_choice"] == "none"
