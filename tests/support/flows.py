"""What the end-to-end suites check about responses and streams (both the scripted
upstream's and the real Llama Stack's)."""

from __future__ import annotations

import re
from typing import Any

from tests.support.gateway_proc import events_of
from tests.support.openai_shapes import validate_event

CONV = re.compile(r"^conv_[0-9a-f]{48}$")
ADD_PROMPT = "Use the add tool to add two numbers"
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Get the weather for a city",
                "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                               "required": ["location"]}}


def conversation_of(response: Any) -> str:
    """spec 001 returns `conversation` as a string; the SDK keeps it as given."""
    value = response.conversation
    return value if isinstance(value, str) else value.id


def checked(frames: list[tuple[str | None, Any]]) -> list[dict[str, Any]]:
    """Frames are `event: <type>` + `data:`, numbered from 0, valid, and end with [DONE]."""
    assert frames, "empty stream"
    assert frames[-1] == (None, "[DONE]"), frames[-1]
    assert all(data != "[DONE]" for _, data in frames[:-1])
    events = list(events_of(frames))
    assert [name for name, _ in frames[:-1]] == [event["type"] for event in events]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    for event in events:
        validate_event(event)
    return events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"].removeprefix("response.") for event in events]


def failed_mcp_call(events: list[dict[str, Any]], expected_error: dict[str, Any]) -> int:
    """Checks a failed MCP call's events carry the repaired error object on its item;
    returns the call's output index."""
    failed = kinds(events).index("mcp_call.failed")
    done = events[failed + 1]
    assert done["type"] == "response.output_item.done" and done["item"]["error"] == expected_error
    assert events[failed]["item_id"] == done["item"]["id"]
    return events[failed]["output_index"]


def chained_mcp_call_errors(gateway: Any, first_body: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn with a failing MCP call, then one chained to it by previous_response_id:
    the `mcp_call` items of the second turn's input_items (the earlier turn replayed)."""
    first = gateway.post("/v1/responses", first_body).json()
    second = gateway.post("/v1/responses", {"input": "What went wrong?", "previous_response_id": first["id"]})
    assert second.status == 200, second.body
    listing = gateway.get(f"/v1/responses/{second.json()['id']}/input_items").json()
    return [item for item in listing["data"] if item["type"] == "mcp_call"]
