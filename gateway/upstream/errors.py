"""Map what the upstream answered into the gateway's error envelope.

4xx keeps its status with the upstream's message as the cause; 5xx becomes 500; a
context-length complaint is 413 (spec 001); 429 is the model's quota (LCORE's strings).
The message is relayed only after `redact` took out what the gateway injected into
the request (the client's `redact`: gateway/redaction.py).
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from gateway.schema.errors import ApiError, prompt_too_long

_SUMMARIES = {
    400: ("Invalid request", "upstream_bad_request"),
    401: ("Upstream rejected the credentials", "upstream_unauthorized"),
    403: ("Upstream refused the request", "upstream_forbidden"),
    404: ("Not found", "upstream_not_found"),
    409: ("Conflict", "upstream_conflict"),
    422: ("Invalid request", "upstream_invalid_request"),
}


def upstream_message(body: bytes) -> str:
    """The human message in Llama Stack's, FastAPI's or OpenAI's error shapes."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode(errors="replace").strip()[:2000] or "no message"
    if isinstance(data, dict):
        detail = data.get("detail")
        if isinstance(detail, str):
            return detail
        cause = detail.get("cause") if isinstance(detail, dict) else None
        if isinstance(cause, str):
            return cause
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        message = data.get("message")
        if isinstance(message, str):
            return message
    return orjson.dumps(data).decode()[:2000]


def is_context_length(message: str) -> bool:
    lowered = message.lower()
    return "context_length" in lowered or "context length" in lowered


def map_upstream_error(status: int, body: bytes, model: str | None = None,
                       redact: Callable[[str], str] | None = None) -> ApiError:
    message = upstream_message(body)
    return upstream_error(status, redact(message) if redact is not None else message, model)


def upstream_error(status: int, message: str, model: str | None = None) -> ApiError:
    """The gateway's error for an upstream's answer of `status` saying `message`."""
    if is_context_length(message):
        return prompt_too_long(model)
    if status == 429:
        return ApiError(429, "The model quota has been exceeded",
                        f"The token quota for model {model} has been exceeded." if model else message,
                        code="model_quota_exceeded")
    if 400 <= status < 500:
        summary, code = _SUMMARIES.get(status, ("Upstream refused the request", "upstream_client_error"))
        return ApiError(status, summary, message, code=code)
    return ApiError(500, "Internal server error", message, code="upstream_error")
