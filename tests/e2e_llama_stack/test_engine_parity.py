"""Parity: the same requests through the local engine (over the scripted Chat
Completions upstream) and through forward mode in front of a real Llama Stack 0.7.3
(whose own loop runs over the same scripted upstream, its stream repaired by the
gateway) give the same output item types and event types, in the same order.

Allowed differences, each with its reason:
- `model`: Llama Stack names the model `scripted/scripted-chat` (its provider prefix);
  the engine talks to the chat server directly, which calls it `scripted-chat`.
- ids and `call_id`s: generated on each side.
- Text is the same (the same scripted model answers), so the counts of deltas are too;
  nothing else is compared.
"""

from __future__ import annotations

import pytest

from tests.support.gateway_proc import Gateway

from .conftest import Chain
from .helpers import WEATHER_TOOL, checked, kinds

pytestmark = pytest.mark.llama_stack

REQUESTS = [
    pytest.param({"input": "Hello parity"}, id="text"),
    pytest.param({"input": "Be brief", "instructions": "You are terse."}, id="instructions"),
    pytest.param({"input": "What is the weather in Paris? Use the tool.", "tools": [WEATHER_TOOL]},
                 id="function-call"),
    pytest.param({"input": "Hi, no tools needed", "tools": [WEATHER_TOOL], "tool_choice": "none"},
                 id="tool-choice-none"),
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
    return kinds(events), [item["type"] for item in final["output"]], final


@pytest.mark.parametrize("body", REQUESTS)
def test_same_items_and_events(chain: Chain, engine: Gateway, body: dict):
    forward_events, forward_items, forward = _run(chain.gateway, body)
    engine_events, engine_items, local = _run(engine, body)
    assert engine_items == forward_items
    assert engine_events == forward_events
    assert local["output_text"] == forward["output_text"]
    assert local["status"] == forward["status"]


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
