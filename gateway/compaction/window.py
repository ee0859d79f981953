"""`POST /v1/responses/compact`'s request and answer (sans-I/O).

The request is the spec's `CompactResponseMethodPublicBody` (with the fields the
`openai` package also sends, accepted and unused). The window to summarize is the
request's `input`, after the chain its `previous_response_id` continues; it becomes one
`store: false` turn whose last user message is the operator's prompt
(`response_compaction.prompt`), so the model summarizes instead of answering, with no
tools offered (`tool_choice: "none"`), and the turn is run and charged like any other.
The answer, `response.compaction`, lists the window's user messages (the chain's, one per
recorded turn, then the input's), then one `compaction` item sealing the summary.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Sequence, TypedDict

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from gateway.compaction.items import COMPACTION
from gateway.schema.errors import ApiError
from gateway.schema.ids import new_item_id
from gateway.schema.fail_fast import validate
from gateway.schema.json_types import JsonObject


class CompactRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]] | None = None
    previous_response_id: str | None = None
    # The next turn sends its own instructions (they are never carried over): a
    # summary of the conversation does not include them.
    instructions: str | None = None
    prompt_cache_key: str | None = Field(None, max_length=64)
    # The `openai` package's, accepted: nothing here caches prompts or picks tiers.
    service_tier: str | None = None
    image: dict[str, Any] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: str | None = None


_ADAPTER = TypeAdapter(CompactRequest)


def parse_compact_request(raw: Any) -> CompactRequest:
    """The spec's model (FastAPI's 422 list), and something to compact (400)."""
    request = validate(_ADAPTER, raw)
    if not request.input and request.previous_response_id is None:
        raise ApiError(400, "Invalid attribute value", "Nothing to compact: give `input`, `previous_response_id` "
                       "or both", code="invalid_value", param="input")
    return request


def summary_turn(request: CompactRequest, prompt: str) -> JsonObject:
    """The Responses request of the summary turn: the window, then the prompt."""
    window: list[Any] = ([{"type": "message", "role": "user", "content": request.input}]
                         if isinstance(request.input, str) else list(request.input or ()))
    raw: dict[str, Any] = {"model": request.model, "input": [*window, {"type": "message", "role": "user",
                                                                       "content": prompt}],
                           "store": False, "stream": False, "generate_topic_summary": False,
                           "tool_choice": "none"}   # a summary calls no tool: none is offered
    if request.previous_response_id is not None:
        raw["previous_response_id"] = request.previous_response_id
    return raw


def user_messages(input_: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The window's user messages as output items (earlier compaction items are in the
    new summary, so they are not repeated)."""
    if isinstance(input_, str):
        return [_user_message(None, input_)]
    return [_user_message(item.get("id"), item.get("content")) for item in input_ or ()
            if item.get("type", "message") == "message" and item.get("role") == "user"]


def _user_message(item_id: Any, content: Any) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
    return {"id": item_id if isinstance(item_id, str) and item_id else new_item_id("msg"), "type": "message",
            "status": "completed", "role": "user", "content": parts}


class ResponseUsage(TypedDict):
    """OpenAI's `ResponseUsage`."""
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class CompactedResponse(TypedDict):
    """OpenAI's `response.compaction` object (`/v1/responses/compact`'s answer)."""
    id: str
    object: Literal["response.compaction"]
    created_at: int
    output: list[dict[str, Any]]
    usage: ResponseUsage


def usage(reported: Any) -> ResponseUsage:
    """The summary turn's usage in the shape of `ResponseUsage`."""
    reported = reported if isinstance(reported, dict) else {}
    inputs, outputs = int(reported.get("input_tokens") or 0), int(reported.get("output_tokens") or 0)
    details = reported.get("input_tokens_details") or {}
    reasoning = (reported.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    return {"input_tokens": inputs, "input_tokens_details": {"cached_tokens": int(details.get("cached_tokens") or 0),
                                                             "cache_write_tokens": int(details.get("cache_write_tokens")
                                                                                       or 0)},
            "output_tokens": outputs, "output_tokens_details": {"reasoning_tokens": int(reasoning)},
            "total_tokens": int(reported.get("total_tokens") or inputs + outputs)}


def compacted(request: CompactRequest, sealed: str, reported_usage: Any,
              earlier: Sequence[str] = ()) -> CompactedResponse:
    """The `response.compaction` object: the user messages of the chain (`earlier`: the
    text of each of its turns, oldest first), then the input's, then the item."""
    item = {"id": new_item_id("cmp"), "type": COMPACTION, "encrypted_content": sealed}
    chain = [_user_message(None, text) for text in earlier]
    return {"id": new_item_id("resp"), "object": "response.compaction", "created_at": int(time.time()),
            "output": [*chain, *user_messages(request.input), item], "usage": usage(reported_usage)}
