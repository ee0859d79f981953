"""What a turn sends to its backend, built from the request: the Responses body both
backends start from (each finishes it: `turns/forward.py`, `turns/local.py`) and the
request-input helpers `prepare()` decides with."""

from __future__ import annotations

from typing import Any

from gateway.config import InferenceConfig
from gateway.schema.responses_request import LCORE_EXTENSIONS, ResponsesRequest, converted_scalars, forwarded_scalars
from gateway.turns.turn import Plan


def backend_body(raw: dict[str, Any], request: ResponsesRequest, plan: Plan, tools: list[dict[str, Any]] | None,
                 inference: InferenceConfig) -> dict[str, Any]:
    """The Responses body a backend gets: the client's JSON as sent (LCORE's
    extensions dropped, lax scalars converted), with the gateway's model, tools and
    conversation or chain, and the loop limits applied (`loop_limit`)."""
    body = {key: value for key, value in raw.items() if key not in LCORE_EXTENSIONS}
    body.update(forwarded_scalars(raw, request))
    body["model"] = plan.model.id
    # The system prompt `prepare()` resolved (`turns/prompts.py`): the request's, or the operator's.
    if request.instructions is None:
        body.pop("instructions", None)
    else:
        body["instructions"] = request.instructions
    # The gateway runs a background turn itself (streamed upstream, so it records the
    # events); the backend sees an ordinary turn and the settlement is any turn's.
    body.pop("background", None)
    body.pop("conversation", None)
    body.pop("previous_response_id", None)
    last_response = plan.existing.last_response_id if plan.existing is not None else None
    if plan.forked_from is not None:
        body["previous_response_id"] = plan.forked_from
    elif plan.append_to_upstream or (not plan.store and last_response):
        # Chained, not sent with `conversation`: a `store: false` turn reads the
        # conversation's history without adding to it.
        body["previous_response_id"] = last_response
    elif plan.upstream_conversation_id is not None and plan.store:
        body["conversation"] = plan.upstream_conversation_id
    elif last_response:
        body["previous_response_id"] = last_response
    # `null` asks for the default: sent as absent, so the backend applies (and its
    # response echoes) `true` / `"auto"`, the types a Response declares, not null.
    for key in ("parallel_tool_calls", "tool_choice"):
        if key in body and body[key] is None:
            del body[key]
    if tools is None:
        body.pop("tools", None)
        if body.get("tool_choice") == "none":
            body.pop("tool_choice")
    else:
        if request.tools is not None:
            # The client's tools come first, in order (`ConfiguredTools.for_request`): their
            # lax-converted scalars as validated, as the top-level ones above.
            client = len(request.tools)
            tools = [converted_scalars(tool, model) for tool, model in zip(tools, request.tools)] + tools[client:]
        body["tools"] = tools
    # The operator's defaults where the client sent none (or null), and never more than
    # the operator's limits: the response echoes the value applied.
    body["max_tool_calls"] = loop_limit(body.get("max_tool_calls"), inference.max_tool_calls,
                                        inference.max_tool_calls_limit)
    body["max_infer_iters"] = loop_limit(body.get("max_infer_iters"), inference.max_infer_iters,
                                         inference.max_infer_iters_limit)
    return body


def loop_limit(asked: Any, default: int, limit: int) -> int:
    """A client's loop limit as applied: the default without one, at most `limit`."""
    if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
        return default
    return min(asked, limit)


def answers_approval(input_: Any) -> bool:
    return isinstance(input_, list) and any(
        isinstance(item, dict) and item.get("type") == "mcp_approval_response" for item in input_)


def input_items(input_: Any) -> list[dict[str, Any]]:
    """The request input as conversation items (a string is one user message)."""
    if isinstance(input_, str):
        return [{"type": "message", "role": "user", "content": input_}]
    return [item if "type" in item else {"type": "message", **item} for item in input_ if isinstance(item, dict)]


def as_input(item: dict[str, Any], keep_id: bool = False) -> dict[str, Any]:
    """An item a client added to a conversation (`conversations/openai.py`), as a
    turn's input item (what the Responses API accepts as input: a
    message without its listing-only `id`/`status`; `keep_id`: with its `id`, which
    Llama Stack keeps the item under in its conversation)."""
    if item.get("type") != "message":
        return item
    dropped = ("status",) if keep_id else ("id", "status")
    return {key: value for key, value in item.items() if key not in dropped}


def question_text(input_: Any) -> str:
    """The text of the request's user messages (a string input is one), what a topic
    summary is made of (LCORE's `extract_text_from_input`)."""
    if isinstance(input_, str):
        return input_
    texts: list[str] = []
    for item in input_ if isinstance(input_, list) else ():
        if not isinstance(item, dict) or item.get("role") != "user" or item.get("type", "message") != "message":
            continue
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(part["text"] for part in content if isinstance(part, dict)
                         and part.get("type") == "input_text" and isinstance(part.get("text"), str))
    return " ".join(text for text in texts if text)


def has_item_reference(raw: Any) -> bool:
    items = raw.get("input") if isinstance(raw, dict) else None
    return isinstance(items, list) and any(isinstance(item, dict) and item.get("type") == "item_reference"
                                           for item in items)
