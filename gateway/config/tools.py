"""Ours: the configuration of the local engine's own tool back ends (engine mode only):
the search endpoint behind `web_search` and the moderation endpoint behind the
request's `guardrails`. Forward mode passes both tool and field to the upstream."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from gateway.config.base import Strict


def _http_url(value: str | None) -> str | None:
    if value is not None and not re.match(r"^https?://[^/]", value):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value


class WebSearchConfig(Strict):
    """The endpoint a `web_search` tool searches (the README's Engine mode section
    documents its small HTTP contract). Without this section a request's `web_search`
    tool is a 422 in engine mode."""

    url: str
    api_key: str | None = None          # sent as `Authorization: Bearer <api_key>`
    timeout: float = Field(10, gt=0)    # seconds for the whole search; then an error result
    max_results: int = Field(5, ge=1, le=50)

    _url_shape = field_validator("url")(lambda cls, value: _http_url(value))


class GuardrailsConfig(Strict):
    """Where a request's `guardrails` are checked: an OpenAI-compatible
    `POST /v1/moderations` (each guardrail id is the moderation `model`)."""

    moderation_url: str | None = None   # the endpoint itself; None: the upstream's /v1/moderations
    api_key: str | None = None          # for moderation_url (the upstream's own key otherwise)
    timeout: float = Field(10, gt=0)
    # Unreachable moderation: refuse (the default: input → 503, output → response.failed)
    # or let the text through unchecked (logged).
    fail_open: bool = False
    # The answer is held back and checked per sentence (None), or every this many
    # characters.
    output_window: int | None = Field(None, ge=1)

    _url_shape = field_validator("moderation_url")(lambda cls, value: _http_url(value))
