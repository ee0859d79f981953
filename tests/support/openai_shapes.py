"""The yardstick: what the `openai` package's types and stream helper accept.

Every response body and stream event the gateway emits must validate against
`openai.types.responses` (`conversation` excepted: spec 001 makes it a string), and the
SDK's own stream accumulator must consume the event sequence without error.
"""

from __future__ import annotations

import typing
from typing import Any

from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

_union = typing.get_args(ResponseStreamEvent)[0] if typing.get_origin(ResponseStreamEvent) is typing.Annotated \
    else ResponseStreamEvent
EVENT_CLASSES = {literal: cls for cls in typing.get_args(_union)
                 for literal in typing.get_args(cls.model_fields["type"].annotation)}


def _without_conversation(response: dict[str, Any]) -> dict[str, Any]:
    # spec 001 returns `conversation` as a string; the openai type is an object.
    return {key: value for key, value in response.items() if key != "conversation"}


def validate_response(body: dict[str, Any]) -> Response:
    return Response.model_validate(_without_conversation(body))


def validate_event(event: dict[str, Any]):
    cls = EVENT_CLASSES.get(event.get("type"))
    if cls is None:
        raise AssertionError(f"not an OpenResponses event type: {event.get('type')!r}")
    if isinstance(event.get("response"), dict):
        event = {**event, "response": _without_conversation(event["response"])}
    return cls.model_validate(event)


def replay_through_sdk(events: list[dict[str, Any]]) -> Any:
    """Run the SDK's `responses.stream()` accumulator over the events; return its final response."""
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for event in events:
        for out in state.handle_event(validate_event(event)):
            if out.type == "response.completed":
                final = out.response
    return final
