"""The access line: one structured line per request, written when the request ends
(with `service.access_log`, LCORE's default), in place of aiohttp's access log.

Fields (docs/tracing-and-logs.md): the request id, the keyed hash of the user id
(`otel_env.UserHasher`, never the id), method, route template (never the raw path, so
ids in paths stay out), status, duration, model, tokens in and out, the upstream's time
and, for streams, the time to the first event. `service.access_log_format` chooses
`text` (the usual log format; the status colored by `service.color_log` when stderr is
a terminal) or `json` (the bare object, one a line, for log shippers). The lines are
written at the `gateway.access` logger's INFO, so `GATEWAY_LOG_LEVEL=WARNING` silences them.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, TextIO

import orjson

from gateway.observability.requests import RequestRecord
from gateway.user_ids import SHORT_HASH

log = logging.getLogger("gateway.access")

_GREEN, _YELLOW, _RED, _RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"


class AccessLog:
    """Each line is one write to stderr, not a logging record: Python's logging machinery
    (a record, a formatter, a handler's lock) was two thirds of the line's cost
    (bench/README.md, "The access line"). The `gateway.access` logger's level still
    decides whether lines are written (`GATEWAY_LOG_LEVEL`)."""

    def __init__(self, fmt: str, color: bool, stream: TextIO | None = None):
        self._json = fmt == "json"
        self._stream = stream
        self._color = color and not self._json and (stream or sys.stderr).isatty()
        # stderr's descriptor: a line is one os.write of its bytes, without the text
        # layer (stderr is line-buffered, so nothing of other lines is pending in it).
        self._fd: int | None = None
        if stream is None:
            try:
                sys.stderr.flush()
                self._fd = sys.stderr.fileno()
            except (AttributeError, OSError, ValueError):   # no descriptor: write text
                self._fd = None
        self._second = -1
        self._stamp = ""
        # In a worker of `service.workers` (http/supervisor.py): the line says which one
        # answered (`"worker": N, "pid": P` in JSON, `worker=N` in text); nothing otherwise.
        worker = os.environ.get("GATEWAY_WORKER_ID")
        self._worker_json = b',"worker":%s,"pid":%d}\n' % (worker.encode(), os.getpid()) \
            if worker and worker.isdigit() else None
        self._worker_text = f" worker={worker}\n" if worker and worker.isdigit() else None

    def write(self, record: RequestRecord, request: Any, route: str, status: int, duration: float,
              user: str | None) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        upstream = record.upstream
        first = record.first_event if record.streamed else None
        now = time.time()
        if self._json:
            data = orjson.dumps({
                "time": self._time(now) + f".{int(now % 1 * 1000):03d}Z", "type": "access",
                "request_id": request.get("request_id"), "user": user, "method": request.method,
                "route": route or None, "status": status, "duration_ms": round(duration * 1000, 3),
                "model": record.model, "input_tokens": record.input_tokens, "output_tokens": record.output_tokens,
                "upstream_ms": round(upstream * 1000, 3) if upstream else None,
                "first_event_ms": round(first * 1000, 3) if first is not None else None,
            }, option=orjson.OPT_APPEND_NEWLINE)
            if self._worker_json is not None:
                data = data[:-2] + self._worker_json
        else:
            data = self._text(now, record, request, route, status, duration, user, upstream, first).encode()
        if self._fd is not None:
            try:
                os.write(self._fd, data)
                return
            except OSError:   # stderr gone: the line is lost, as a logging handler's would be
                return
        (self._stream or sys.stderr).write(data.decode())

    def _time(self, now: float) -> str:
        """The seconds part of the time, formatted once a second: UTC in JSON, local time
        in text lines (as the log's other lines)."""
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)) if self._json else \
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        return self._stamp

    def _text(self, now: float, record: RequestRecord, request: Any, route: str, status: int, duration: float,
              user: str | None, upstream: float, first: float | None) -> str:
        """The usual log prefix (`%(asctime)s INFO gateway.access: `), then the fields."""
        shown = str(status)
        if self._color:
            shown = f"{_GREEN if status < 400 else _YELLOW if status < 500 else _RED}{shown}{_RESET}"
        parts = [f"{self._time(now)},{int(now % 1 * 1000):03d} INFO gateway.access:",
                 request.method, route or "-", shown, f"{duration * 1000:.1f}ms",
                 f"request_id={request.get('request_id')}"]
        if user:
            parts.append(f"user={user[:SHORT_HASH]}")   # enough to tell users apart by eye
        if record.model:
            parts.append(f"model={record.model}")
        if record.input_tokens is not None or record.output_tokens is not None:
            parts.append(f"tokens={record.input_tokens}/{record.output_tokens}")
        if upstream:
            parts.append(f"upstream={upstream * 1000:.1f}ms")
        if first is not None:
            parts.append(f"first_event={first * 1000:.1f}ms")
        return " ".join(parts) + (self._worker_text or "\n")
