from __future__ import annotations

from gateway.streaming.enrich import Enricher, output_text
from gateway.streaming.events import Event


def message(*texts: str) -> dict:
    return {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": t} for t in texts] + [{"type": "refusal", "refusal": "n"}]}


def test_output_text_joins_assistant_text_only():
    response = {"output": [message("a", "b"), {"type": "function_call"}, message("c")]}
    assert output_text(response) == "abc"
    assert output_text({"output": None}) == ""


def test_enrich_lifecycle_and_terminal():
    enricher = Enricher("conv_x", "resp_prev")
    created = enricher.apply(Event.build({"type": "response.created", "response": {"previous_response_id": None}}))
    assert created.data["response"] == {"previous_response_id": "resp_prev", "conversation": "conv_x"}
    progress = enricher.apply(Event.build({"type": "response.in_progress", "response": {}}))
    assert progress.data["response"]["available_quotas"] == {} and progress.data["response"]["output_text"] == ""
    done = enricher.terminal(Event.build({"type": "response.completed", "response": {
        "status": "completed", "output": [message("hi")], "completed_at": None}}), {"daily": 5})
    response = done.data["response"]
    assert response["available_quotas"] == {"daily": 5} and response["output_text"] == "hi"
    assert response["completed_at"] and response["conversation"] == "conv_x"


def test_untouched_events_stay_unparsed():
    raw = b'{"delta":"x","sequence_number":1,"type":"response.output_text.delta"}'
    event = Enricher("conv_x", None).apply(Event("response.output_text.delta", raw))
    assert not event.parsed


def test_a_chosen_model_is_shown_and_the_conversation_may_be_null():
    enricher = Enricher(None, None, model="scripted-chat")
    response = {"model": "scripted/scripted-chat"}
    enricher.annotate(response)
    assert response == {"model": "scripted-chat", "conversation": None}


def test_tool_echo_loses_what_the_gateway_attached():
    tools = [{"type": "mcp", "server_label": "calc", "server_url": "http://calc", "authorization": "tok",
              "headers": {"X-Key": "k"}, "require_approval": "never"},
             {"type": "mcp", "server_label": "own", "server_url": "http://own", "authorization": "client-tok"},
             {"type": "function", "name": "f"}]
    response = {"tools": tools}
    Enricher("conv_x", None, configured_labels=frozenset({"calc"})).annotate(response)
    assert response["tools"] == [{"type": "mcp", "server_label": "calc", "require_approval": "never"},
                                 {"type": "mcp", "server_label": "own", "server_url": "http://own"},
                                 {"type": "function", "name": "f"}]


def test_the_object_form_is_a_fresh_object_in_each_response():
    enricher = Enricher({"id": "conv_x"}, None)
    first, second = {}, {}
    enricher.annotate(first)
    enricher.annotate(second)
    assert first["conversation"] == second["conversation"] == {"id": "conv_x"}
    assert first["conversation"] is not second["conversation"] is not enricher.conversation
