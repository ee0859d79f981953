"""Parity: the same requests through the local engine (over the scripted Chat
Completions upstream) and through forward mode in front of a real Llama Stack 0.7.3
(whose own loop runs over the same scripted upstream, its stream repaired by the
gateway) give the same output item types and event types, in the same order.

Allowed differences, each with its reason:
- `model`: Llama Stack names the model `scripted/scripted-chat` (its provider prefix);
  the engine talks to the chat server directly, which calls it `scripted-chat`.
- ids and `call_id`s: generated on each side; not compared.
- The order of the closing `*.done` events of parallel tool calls: Llama Stack sends
  every `function_call_arguments.done` first, then every `output_item.done`; the engine
  closes each call in turn (its arguments, then the item), as OpenAI does. Both pair
  every `added` with its `done`; runs of consecutive `.done` events are compared as sets.
- Reasoning: Llama Stack 0.7.3 drops the upstream's `reasoning_content`; the engine
  shows it as a `reasoning` item with `response.reasoning_text.*` events (the issue asks
  for it). The reasoning item's events are left out of the engine's side before
  comparing, and its presence is asserted instead.
"""

from __future__ import annotations

import pytest

from tests.support.gateway_proc import Gateway

from .conftest import Chain
from .helpers import WEATHER_TOOL, checked, done_runs_unordered, kinds

pytestmark = pytest.mark.llama_stack
TIME_TOOL = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}

REQUESTS = [
    pytest.param({"input": "Hello parity"}, id="text"),
    pytest.param({"input": "Be brief", "instructions": "You are terse."}, id="instructions"),
    pytest.param({"input": "What is the weather in Paris? Use the tool.", "tools": [WEATHER_TOOL]},
                 id="function-call"),
    pytest.param({"input": "Hi, no tools needed", "tools": [WEATHER_TOOL], "tool_choice": "none"},
                 id="tool-choice-none"),
    pytest.param({"input": "parallel-calls: use the tools", "tools": [WEATHER_TOOL, TIME_TOOL]},
                 id="parallel-calls"),
    pytest.param({"input": "think-aloud first"}, id="reasoning"),
    pytest.param({"input": "finish-length now"}, id="length"),
    pytest.param({"input": "Name a city", "text": {"format": {"type": "json_schema", "name": "city", "schema": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}}, id="structured-output"),
    pytest.param({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is in this image?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}]}]},
        id="image"),
]


@pytest.fixture(scope="module")
def engine(chain: Chain, gateway_factory) -> Gateway:
    return gateway_factory(chain.scripted.url, llama_stack={"url": chain.scripted.url, "max_retries": 0,
                                                            "api": "chat_completions"})


def _run(gateway: Gateway, body: dict) -> tuple[list[str], list[str], dict]:
    status, frames = gateway.stream(body)
    assert status == 200, frames
    events = checked(frames)
    final = events[-1]["response"]
    reasoning = {index for index, item in enumerate(final["output"]) if item["type"] == "reasoning"}
    shown = [event for event in events if event.get("output_index") not in reasoning]
    return done_runs_unordered(kinds(shown)), [item["type"] for item in final["output"]], final


@pytest.mark.parametrize("body", REQUESTS)
def test_same_items_and_events(chain: Chain, engine: Gateway, body: dict):
    forward_events, forward_items, forward = _run(chain.gateway, body)
    engine_events, engine_items, local = _run(engine, body)
    if engine_items[:1] == ["reasoning"]:
        assert forward_items[:1] != ["reasoning"]  # Llama Stack dropped it (allowed above)
        engine_items = engine_items[1:]
    assert engine_items == forward_items
    assert engine_events == forward_events
    assert local["output_text"] == forward["output_text"]
    assert local["status"] == forward["status"]
    assert local["incomplete_details"] == forward["incomplete_details"]


def test_reasoning_is_shown_by_the_engine(engine: Gateway):
    events, items, final = _run(engine, {"input": "think-aloud first"})
    assert items == ["reasoning", "message"]
    assert final["output"][0]["content"][0]["text"] == "Thinking about: think-aloud first"


def test_function_round_trip_continues_alike(chain: Chain, engine: Gateway):
    answers = []
    for gateway in (chain.gateway, engine):
        first = gateway.post("/v1/responses", {"input": "What is the weather in Oslo? Use the tool.",
                                               "tools": [WEATHER_TOOL]}).ok()
        call = first["output"][0]
        second = gateway.post("/v1/responses", {"previous_response_id": first["id"], "tools": [WEATHER_TOOL],
                                                "input": [{"type": "function_call_output",
                                                           "call_id": call["call_id"], "output": "-3 C"}]}).ok()
        answers.append((call["arguments"], [item["type"] for item in second["output"]], second["output_text"]))
    assert answers[0] == answers[1]
