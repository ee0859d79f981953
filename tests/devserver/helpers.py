"""Helpers for the devserver tests: SSE parsing, id normalisation, openai type checks."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

from openai.types.responses import Response, ResponseStreamEvent

FIXTURES = Path(__file__).parents[1] / "fixtures" / "llama-stack-0.7.3"
CHAT = "scripted/scripted-chat"

_union = typing.get_args(ResponseStreamEvent)[0]
EVENT_CLASSES = {literal: cls for cls in typing.get_args(_union)
                 for literal in typing.get_args(cls.model_fields["type"].annotation)}

_ID_RE = re.compile(r"(resp|msg|fc|mcp_list|approval)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
                    r"[0-9a-f]{4}-[0-9a-f]{12}|(msg|conv)_[0-9a-f]{48}|call_[0-9a-f]{24}")
_TIME_RE = re.compile(r'"(created_at|completed_at|created)":\d+')


def normalise(text: str) -> str:
    """Replace ids by stable placeholders (first seen = 1) and timestamps by 0."""
    seen: dict[str, str] = {}

    def repl(match: re.Match[str]) -> str:
        value = match.group(0)
        if value not in seen:
            prefix = value.rsplit("_", 1)[0]
            seen[value] = f"{prefix}_<{len(seen) + 1}>"
        return seen[value]

    return _TIME_RE.sub(lambda m: f'"{m.group(1)}":0', _ID_RE.sub(repl, text))


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def fixture_request(case: str) -> dict[str, Any]:
    for entry in json.loads(fixture_text("index.json")):
        if entry["case"] == case:
            return entry["request_json"]
    raise KeyError(case)


def sse_data(text: str) -> list[str]:
    """The data payloads of an SSE body (asserting it has only `data:` lines)."""
    payloads = []
    for block in text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block[:80]
        assert "\n" not in block, block[:80]
        payloads.append(block[len("data: "):])
    return payloads


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(p) for p in sse_data(text) if p != "[DONE]"]


# Events Llama Stack 0.7.3 emits that the openai types reject, and why.
QUIRK_TYPES = {
    "response.mcp_list_tools.in_progress",  # no item_id / output_index
    "response.mcp_list_tools.completed",    # idem
    "response.mcp_call.completed",          # idem
    "response.mcp_call.arguments.done",     # misnamed (openai: mcp_call_arguments.done)
}


def _known_usage_quirk(response: dict[str, Any]) -> dict[str, Any]:
    """Llama Stack 0.7.3's usage lacks input_tokens_details.cache_write_tokens (a quirk
    the openai type rejects): check that, then add it so the rest can be validated."""
    usage = response.get("usage")
    if not usage:
        return response
    assert "cache_write_tokens" not in usage["input_tokens_details"]
    details = {**usage["input_tokens_details"], "cache_write_tokens": 0}
    return {**response, "usage": {**usage, "input_tokens_details": details}}


def validate_event(event: dict[str, Any]) -> Any:
    cls = EVENT_CLASSES[event["type"]]
    if isinstance(event.get("response"), dict):
        event = {**event, "response": _known_usage_quirk(event["response"])}
    return cls.model_validate(event)


def validate_response(body: dict[str, Any]) -> Response:
    return Response.model_validate(_known_usage_quirk(body))


def check_events_with_openai_types(events: list[dict[str, Any]]) -> None:
    """Every event that is not a recorded quirk validates against the openai types."""
    for event in events:
        if "type" not in event:  # the untyped {"error": ...} event
            assert set(event) == {"error"}
            continue
        if event["type"] in QUIRK_TYPES:
            assert event["type"] not in EVENT_CLASSES or "item_id" not in event
            continue
        validate_event(event)


def check_sequence(events: list[dict[str, Any]], gaps: int = 0) -> None:
    seqs = [e["sequence_number"] for e in events if "sequence_number" in e]
    assert seqs[0] == 0
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    assert seqs[-1] - seqs[0] + 1 - len(seqs) == gaps
