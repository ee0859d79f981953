"""The configuration of a gateway whose turns run on the local engine, in front of a
Chat Completions upstream (the scripted upstream started with `--no-responses`)."""

from __future__ import annotations

from typing import Any


def engine_config(chat_url: str, **extra: Any) -> dict[str, Any]:
    """`gateway_factory(chat_url, **engine_config(chat_url, web_search=...))`."""
    return {"llama_stack": {"url": chat_url, "max_retries": 0, "api": "chat_completions"}, **extra}
