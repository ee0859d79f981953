"""The access line: one structured line per request, written when the request ends
(with `service.access_log`, LCORE's default), in place of aiohttp's access log.

Fields (docs/tracing-and-logs.md): the request id, the keyed hash of the user id
(`otel_env.UserHasher`, never the id), method, route template (never the raw path, so
ids in paths stay out), status, duration, model, tokens in and out, the upstream's time
and, for streams, the time to the first event. `service.access_log_format` chooses
`text` (the usual log format; the status colored by `service.color_log` when stderr is
a terminal) or `json` (the bare object, one a line, for log shippers). The lines go
through the `gateway.access` logger at INFO, so `GATEWAY_LOG_LEVEL=WARNING` silences them.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

from gateway.observability.requests import RequestRecord

log = logging.getLogger("gateway.access")

_GREEN, _YELLOW, _RED, _RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"


class AccessLog:
    def __init__(self, fmt: str, color: bool):
        self._json = fmt == "json"
        self._color = color and not self._json and sys.stderr.isatty()
        self._second = -1
        self._stamp = ""
        if self._json:
            _bare_lines()

    def write(self, record: RequestRecord, request: Any, route: str, status: int, duration: float,
              user: str | None) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        fields: dict[str, Any] = {
            "request_id": request.get("request_id"), "user": user, "method": request.method,
            "route": route or None, "status": status, "duration_ms": round(duration * 1000, 3),
            "model": record.model, "input_tokens": record.input_tokens, "output_tokens": record.output_tokens,
            "upstream_ms": round(record.upstream * 1000, 3) if record.upstream else None,
            "first_event_ms": round(record.first_event * 1000, 3)
            if record.streamed and record.first_event is not None else None,
        }
        if self._json:
            log.info(orjson.dumps({"time": self._time(), "type": "access", **fields}).decode())
        else:
            log.info(self._text(fields))

    def _time(self) -> str:
        """ISO-8601 UTC with milliseconds; the seconds part formatted once a second."""
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((now - second) * 1000):03d}Z"

    def _text(self, fields: dict[str, Any]) -> str:
        status = fields["status"]
        shown = str(status)
        if self._color:
            shown = f"{_GREEN if status < 400 else _YELLOW if status < 500 else _RED}{shown}{_RESET}"
        parts = [fields["method"], fields["route"] or "-", shown, f"{fields['duration_ms']:.1f}ms",
                 f"request_id={fields['request_id']}"]
        if fields["user"]:
            parts.append(f"user={fields['user'][:16]}")   # enough to tell users apart by eye
        if fields["model"]:
            parts.append(f"model={fields['model']}")
        if fields["input_tokens"] is not None or fields["output_tokens"] is not None:
            parts.append(f"tokens={fields['input_tokens']}/{fields['output_tokens']}")
        if fields["upstream_ms"] is not None:
            parts.append(f"upstream={fields['upstream_ms']:.1f}ms")
        if fields["first_event_ms"] is not None:
            parts.append(f"first_event={fields['first_event_ms']:.1f}ms")
        return " ".join(parts)


def _bare_lines() -> None:
    """JSON lines are the bare object: their own handler, not the usual prefix."""
    if any(getattr(handler, "_gateway_access", False) for handler in log.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._gateway_access = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.propagate = False
