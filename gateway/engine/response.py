"""The response object a local-engine turn starts from, before its emitter
(`engine/emitter.py`) fills in its output and status."""

from __future__ import annotations

import time
from typing import Any


def new_response(response_id: str, model: str, body: dict[str, Any], previous_response_id: str | None,
                 tools: list[dict[str, Any]], background: bool = False) -> dict[str, Any]:
    """The response object as `response.created` shows it (every key the `openai` type
    reads, with the request's settings echoed)."""
    return {
        "id": response_id, "object": "response", "created_at": int(time.time()), "status": "in_progress",
        "background": background, "completed_at": None, "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"), "metadata": body.get("metadata") or {}, "model": model,
        "output": [], "parallel_tool_calls": _applied(body.get("parallel_tool_calls"), True),
        "previous_response_id": previous_response_id, "reasoning": body.get("reasoning"),
        "safety_identifier": body.get("safety_identifier"), "service_tier": "default",
        "store": body.get("store", True), "temperature": body.get("temperature"),
        "text": body.get("text") or {"format": {"type": "text"}}, "tool_choice": _applied(body.get("tool_choice"), "auto"),
        "tools": tools, "top_p": body.get("top_p"), "truncation": body.get("truncation") or "disabled",
        "usage": None,
    }


def _applied(asked: Any, default: Any) -> Any:
    """The setting the turn ran with: the request's, or the default for an absent or
    null one (a Response's `parallel_tool_calls` and `tool_choice` are never null)."""
    return default if asked is None else asked
