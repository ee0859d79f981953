"""JSON shapes of the Llama Stack stand-in: the response object and error bodies."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

JSON = "application/json"


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def detail(message: str, status: int) -> web.Response:
    """FastAPI-style error body, used by Llama Stack for resource and logic errors."""
    return json_response({"detail": message}, status)


def validation_error(errors: list[dict[str, Any]]) -> web.Response:
    """Llama Stack's request-validation body: the repr of pydantic's error list."""
    return json_response({"error": {"message": str({"errors": errors})}}, 400)


NOT_FOUND_BODY = orjson.dumps({"detail": "Not Found"})


def not_found() -> web.Response:
    return web.Response(body=NOT_FOUND_BODY, status=404, content_type=JSON)


def response_not_found(response_id: str) -> web.Response:
    return detail(f"Response '{response_id}' not found. Use 'client.responses.list()' to "
                  "list available Responses.", 404)


def model_not_found_message(model: str) -> str:
    return (f"Model '{model}' not found. Use 'client.models.list()' to list available "
            "Models.")


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    # No cache_write_tokens: Llama Stack 0.7.3 does not send it.
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}


class Echo:
    """The request fields a response object repeats, computed once per request."""

    __slots__ = ("model", "tools", "body", "background")

    def __init__(self, body: dict[str, Any], tools_echo: list[dict[str, Any]]) -> None:
        self.body = body
        self.model = body["model"]
        self.tools = tools_echo
        self.background = bool(body.get("background"))


def response_object(echo: Echo, response_id: str, created_at: int, *, status: str,
                    output: list[dict[str, Any]], usage_: dict[str, Any] | None,
                    completed_at: int | None = None,
                    error: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every key of Llama Stack 0.7.3's response object, in its order.

    Quirks: no `conversation` key; `previous_response_id` is always null.
    """
    b = echo.body
    g = b.get
    return {
        "background": echo.background,
        "created_at": created_at,
        "completed_at": completed_at,
        "error": error,
        "frequency_penalty": g("frequency_penalty", 0.0),
        "id": response_id,
        "incomplete_details": None,
        "model": echo.model,
        "object": "response",
        "output": output,
        "parallel_tool_calls": g("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": g("prompt_cache_key"),
        "prompt": g("prompt"),
        "status": status,
        "temperature": g("temperature", 1.0),
        "text": g("text") or {"format": {"type": "text"}},
        "top_p": g("top_p", 1.0),
        "top_logprobs": g("top_logprobs", 0),
        "tools": echo.tools,
        "tool_choice": g("tool_choice", "auto"),
        "truncation": g("truncation") or "disabled",
        "usage": usage_,
        "instructions": g("instructions"),
        "max_tool_calls": g("max_tool_calls"),
        "reasoning": g("reasoning"),
        "max_output_tokens": g("max_output_tokens"),
        "safety_identifier": g("safety_identifier"),
        "service_tier": g("service_tier") or "default",
        "metadata": g("metadata"),
        "presence_penalty": g("presence_penalty", 0.0),
        "store": g("store", True),
    }


def queued_object(echo: Echo, response_id: str, created_at: int) -> dict[str, Any]:
    """What POST returns for `background: true` (responses-background.json)."""
    obj = response_object(echo, response_id, created_at, status="queued", output=[],
                          usage_=None)
    for key in ("frequency_penalty", "temperature", "top_p", "top_logprobs", "tool_choice",
                "truncation", "service_tier", "presence_penalty"):
        obj[key] = None
    return obj
