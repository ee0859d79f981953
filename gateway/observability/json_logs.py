"""With `service.access_log_format: json`, every other line the gateway writes is JSON
too: each logging record (start-up, the upstream probe, warnings, tracebacks) becomes
one object on one line, `{"time", "type": "log", "level", "logger", "message"}` plus
`exc_info` (the traceback, as one string) when there is one, so a log shipper parses
the whole stream, not only the access lines (gateway/observability/access_log.py)."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import orjson


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        # In a worker of `service.workers` (http/supervisor.py): which one, and its pid.
        worker = os.environ.get("GATEWAY_WORKER_ID")
        self._worker = {"worker": int(worker), "pid": os.getpid()} if worker and worker.isdigit() else {}

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                + f".{int(record.msecs):03d}Z", "type": "log", "level": record.levelname,
                "logger": record.name, "message": record.getMessage(), **self._worker}
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


def use_json_logs() -> None:
    """Every handler of the root logger formats as JSON from now on, and Python's
    `warnings` go through logging (`py.warnings`) instead of raw text on stderr."""
    formatter = JsonFormatter()
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
    logging.captureWarnings(True)
    # An exception nothing caught is a record too, not Python's raw traceback.
    sys.excepthook = lambda kind, value, trace: logging.getLogger("gateway").critical(
        "uncaught exception", exc_info=(kind, value, trace))
    threading.excepthook = _thread_excepthook


def _thread_excepthook(hook: threading.ExceptHookArgs) -> None:
    # `exc_value` is None only for an exception raised without one (never, in practice):
    # then the record carries no traceback rather than a tuple logging cannot format.
    logging.getLogger("gateway").critical(
        "uncaught exception in thread %s", hook.thread.name if hook.thread else "?",
        exc_info=(hook.exc_type, hook.exc_value, hook.exc_traceback) if hook.exc_value is not None else None)
