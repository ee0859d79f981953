"""Error-path triggers and per-request knobs (see the package docstring for the list).

Triggers are words in the last user text (else in the system prompt); knobs are string values in the request's
``metadata``. Both are parsed here once so handlers only branch on the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import orjson

FAIL_UPSTREAM = "fail-upstream"
CONTEXT_OVERFLOW = "context-overflow"
HANG_UPSTREAM = "hang-upstream"
STALL_STREAM = "stall-stream"
BREAK_STREAM = "break-stream"
ERROR_EVENT = "error-event"
# How a completion ends after its text: chat's finish_reason "length" / "content_filter";
# a response `incomplete` with `incomplete_details.reason` "max_output_tokens" /
# "content_filter" (response.incomplete in a stream), as Llama Stack and OpenAI end one.
FINISH_LENGTH = "finish-length"
CONTENT_FILTER = "content-filter"
# Chat Completions only: what else a completion carries.
THINK_ALOUD = "think-aloud"            # reasoning_content deltas before the text
PARALLEL_CALLS = "parallel-calls"      # one call of every tool in one turn
# An error whose message repeats what the request carried (credentials, tools with their
# URLs, provider data), as a careless upstream would: after the stream began, or (the
# `-first` one) as the stream's first event.
ECHO_ERROR_FIRST = "echo-error-first"
ECHO_ERROR = "echo-error"
# Malformed SSE (issue 42), every stream otherwise as usual: lines that are no SSE field
# after the first frames; a `data:` line that is not JSON after the first text delta (or,
# `-first`, as the stream's first frame); the body cut in the middle of an event (half a
# frame, then EOF); the last frame without its blank line.
GARBAGE_FRAME = "garbage-frame"
NOT_JSON_FIRST = "not-json-first"
NOT_JSON_FRAME = "not-json-frame"
CUT_FRAME = "cut-frame"
UNTERMINATED_FRAME = "unterminated-frame"
# Answers by status, before anything (issue 42): 503 `upstream-503`; 429 `rate-limited`,
# and `rate-limited-after` with `Retry-After: 1`. `reset-stream`: a few deltas, then the
# connection is dropped (no end of the chunked body).
UNAVAILABLE = "upstream-503"
RATE_LIMITED = "rate-limited"
RATE_LIMITED_AFTER = "rate-limited-after"
RESET_STREAM = "reset-stream"
STATUS_ANSWERS = {UNAVAILABLE: (503, {}), RATE_LIMITED_AFTER: (429, {"Retry-After": "1"}), RATE_LIMITED: (429, {})}
MALFORMED = (GARBAGE_FRAME, NOT_JSON_FIRST, NOT_JSON_FRAME, CUT_FRAME, UNTERMINATED_FRAME)

# Checked in this order; the first one found wins.
ALL_TRIGGERS = (RATE_LIMITED_AFTER, RATE_LIMITED, UNAVAILABLE, RESET_STREAM, ECHO_ERROR_FIRST, ECHO_ERROR, HANG_UPSTREAM, FAIL_UPSTREAM, CONTEXT_OVERFLOW, STALL_STREAM,
                BREAK_STREAM, ERROR_EVENT, FINISH_LENGTH, CONTENT_FILTER, THINK_ALOUD, PARALLEL_CALLS) + MALFORMED

UPSTREAM_FAILURE_MESSAGE = "scripted upstream failure"
CONTEXT_OVERFLOW_MESSAGE = ("Input exceeds the model's maximum context length "
                            "(context_length_exceeded)")
ERROR_EVENT_MESSAGE = "scripted error event"
# The Responses API's incomplete reason for each stop trigger.
INCOMPLETE_REASONS = {FINISH_LENGTH: "max_output_tokens", CONTENT_FILTER: "content_filter"}
BREAK_AFTER_DELTAS = 3  # break-stream sends this many deltas, then ends the body


GARBAGE = b"this line is no SSE field\n: a comment\nretry: x\n\n"
NOT_JSON = b"data: {this is not JSON\n\n"


def malform(trigger: str | None, frames: list[bytes], opening: int) -> list[bytes]:
    """`frames` (a whole stream; its first `opening` ones come before any text, the
    next is the first text delta) as the malformed-SSE trigger says; as they are for
    any other trigger."""
    if trigger == GARBAGE_FRAME:
        return frames[:opening] + [GARBAGE] + frames[opening:]
    if trigger == NOT_JSON_FIRST:
        return [NOT_JSON] + frames
    if trigger == NOT_JSON_FRAME:
        return frames[:opening + 1] + [NOT_JSON] + frames[opening + 1:]
    if trigger == CUT_FRAME:
        kept = opening + BREAK_AFTER_DELTAS
        return frames[:kept] + [frames[kept][:len(frames[kept]) // 2]]
    if trigger == UNTERMINATED_FRAME:
        return frames[:-1] + [frames[-1].rstrip(b"\n")]
    return frames


def reset(request: Any) -> None:
    """Drop the request's connection under its stream: the body never ends (`reset-stream`)."""
    if request.transport is not None:
        request.transport.abort()


def echo_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    """The echo-error message: what the request carried, verbatim."""
    return (f"scripted echo: Authorization={headers.get('Authorization')!s} "
            f"X-LlamaStack-Provider-Data={headers.get('X-LlamaStack-Provider-Data')!s} "
            f"tools={orjson.dumps(body.get('tools')).decode()}")


def find_trigger(text: str) -> str | None:
    # Fast exit: every trigger has a dash, most texts do not.
    if "-" not in text:
        return None
    for trigger in ALL_TRIGGERS:
        if trigger in text:
            return trigger
    return None


DIALECTS = ("llama-stack", "openai")


@dataclass(slots=True)
class Knobs:
    deltas: int | None = None
    delay_s: float = 0.0
    dialect: str = "llama-stack"
    # The request's tools repeated as they came, credentials and URLs included, as an
    # upstream that echoes everything would (Llama Stack drops URL and headers).
    echo_tools_verbatim: bool = False


def read_knobs(metadata: Any, default_delay_ms: float, default_dialect: str = "llama-stack") -> Knobs:
    """scripted_deltas / scripted_delay_ms / scripted_dialect / scripted_echo_tools from
    metadata; bad values are ignored."""
    knobs = Knobs(delay_s=max(default_delay_ms, 0.0) / 1000.0, dialect=default_dialect)
    if not isinstance(metadata, dict) or not metadata:
        return knobs
    raw = metadata.get("scripted_deltas")
    if raw is not None:
        try:
            knobs.deltas = max(int(str(raw)), 0)
        except ValueError:
            pass
    raw = metadata.get("scripted_delay_ms")
    if raw is not None:
        try:
            knobs.delay_s = max(float(str(raw)), 0.0) / 1000.0
        except ValueError:
            pass
    raw = metadata.get("scripted_dialect")
    if raw in DIALECTS:
        knobs.dialect = raw
    knobs.echo_tools_verbatim = metadata.get("scripted_echo_tools") == "verbatim"
    return knobs
