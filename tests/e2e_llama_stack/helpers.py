"""Checks shared by the tests against a real Llama Stack."""

from __future__ import annotations

from typing import Any

from tests.support.flows import ADD_PROMPT, CONV, WEATHER_TOOL, checked, conversation_of, kinds

__all__ = ["ADD_PROMPT", "CONV", "WEATHER_TOOL", "checked", "conversation_of", "kinds", "user_texts",
           "assistant_texts"]

def user_texts(items: list[dict[str, Any]]) -> list[str]:
    """The texts of the user messages among conversation / input items."""
    texts = []
    for item in items:
        if item.get("type") == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                texts.append(content)
            else:
                texts.extend(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return texts


def assistant_texts(items: list[dict[str, Any]]) -> list[str]:
    texts = []
    for item in items:
        if item.get("type") == "message" and item.get("role") == "assistant":
            texts.extend(part.get("text", "") for part in item.get("content") or [] if isinstance(part, dict))
    return texts


def done_runs_unordered(names: list[str]) -> list[str]:
    """Each run of consecutive `*.done` events sorted (the engine parity tests' allowed differences)."""
    out: list[str] = []
    run: list[str] = []
    for name in names + [""]:
        if name.endswith(".done"):
            run.append(name)
            continue
        out += sorted(run) + ([name] if name else [])
        run = []
    return out
