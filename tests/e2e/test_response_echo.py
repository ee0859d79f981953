"""A response echoes the settings its turn ran with, as the types a Response declares:
`parallel_tool_calls` and `tool_choice` sent as null are the defaults (`true`, `"auto"`),
never null, in forward mode and engine mode: JSON, streamed (SSE and WebSocket) and
background."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response

from tests.support.flows import WEATHER_TOOL, checked
from tests.support.openai_shapes import validate_response
from tests.support.raw_client import wait_until
from tests.support.ws_client import connected, create

NULLS = {"parallel_tool_calls": None, "tool_choice": None}


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                           "api": "chat_completions"})


@pytest.fixture(params=["forward", "engine"])
def either(request, gateway, engine):
    return gateway if request.param == "forward" else engine


def strictly(response: dict[str, Any], parallel: bool = True, choice: Any = "auto") -> Response:
    """The `openai` type accepts the object, and the two settings are what the turn used."""
    typed = validate_response(response)
    assert typed.parallel_tool_calls is parallel and response["parallel_tool_calls"] is parallel
    assert typed.tool_choice is not None and response["tool_choice"] == choice
    return typed


@pytest.mark.parametrize("tools", [[], [WEATHER_TOOL]], ids=["no tools", "a function tool"])
def test_null_settings_echo_the_defaults_in_the_json_body(either, tools):
    body = either.post("/v1/responses", {"input": "Hello", **NULLS, **({"tools": tools} if tools else {})}).ok()
    strictly(body)
    assert body["status"] == "completed"


def test_null_settings_echo_the_defaults_in_the_stream(either):
    status, frames = either.stream({"input": "Stream to me", **NULLS, "tools": [WEATHER_TOOL]})
    assert status == 200
    events = checked(frames)  # every event an openai type
    lifecycle = [event["response"] for event in events if "response" in event]
    assert [event["type"] for event in events if "response" in event][0] == "response.created"
    assert events[-1]["type"] == "response.completed"
    assert len(lifecycle) >= 2
    for response in lifecycle:
        strictly(response)


def test_settings_the_request_made_are_echoed(either):
    body = either.post("/v1/responses", {"input": "Hello", "parallel_tool_calls": False,
                                         "tool_choice": "required", "tools": [WEATHER_TOOL]}).ok()
    strictly(body, parallel=False, choice="required")


def test_forward_mode_sends_no_null_upstream(gateway, upstream):
    upstream.clear()
    gateway.post("/v1/responses", {"input": "Hello", **NULLS, "tools": [WEATHER_TOOL]}).ok()
    sent = upstream.last()["body"]
    assert "parallel_tool_calls" not in sent and "tool_choice" not in sent


def test_a_background_response_echoes_the_defaults(either):
    created = either.post("/v1/responses", {"input": "Hello", **NULLS, "background": True}).ok()
    strictly(created)
    ended = lambda: either.get(f"/v1/responses/{created['id']}").ok()  # noqa: E731
    wait_until(lambda: ended()["status"] not in ("queued", "in_progress"), "the background response's end")
    polled = ended()
    assert polled["status"] == "completed"
    strictly(polled)


async def test_a_websocket_turn_echoes_the_defaults(either):
    async with connected(either) as socket:
        await socket.send(create("Hello", **NULLS, tools=[WEATHER_TOOL]))
        events = await socket.turn()   # each message an `openai` server event
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    for event in events:
        if "response" in event:
            strictly(event["response"])


@pytest.mark.parametrize("sent, echoed", [(0, False), (1, True), ("true", True)])
def test_a_lax_strict_flag_is_echoed_as_the_boolean_it_was_taken_for(either, sent, echoed):
    """`strict: 0` passes lax validation (as in LCORE); the response's tool has `strict:
    false`, the type a FunctionTool declares, not the 0 (found by schemathesis)."""
    tool = {**WEATHER_TOOL, "strict": sent}
    body = either.post("/v1/responses", {"input": "Hello", "tools": [tool]}).ok()
    strictly(body)
    assert body["tools"][0]["strict"] is echoed


def test_a_lax_number_inside_a_tool_is_echoed_as_a_number(either):
    """`score_threshold: false` passes lax validation as 0.0; the echo has the number."""
    tool = {"type": "file_search", "vector_store_ids": [], "ranking_options": {"score_threshold": False}}
    body = either.post("/v1/responses", {"input": "Hello", "tools": [tool], "tool_choice": "auto"}).ok()
    strictly(body)
    threshold = body["tools"][0]["ranking_options"]["score_threshold"]
    assert threshold == 0 and type(threshold) is float
