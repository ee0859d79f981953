"""What the devserver received, for tests (GET /_scripted/requests) and for --log.

Recording sits on the benchmark's hot path, so it keeps references to what aiohttp
already has (raw header pairs, the body bytes) and only decodes them when a test asks.
"""

from __future__ import annotations

import time
from collections import deque
from typing import IO, Any

import orjson

MAX_RECORDS = 10_000

# (ts, method, path, query string, raw header pairs, body bytes). Rendered as
# {"ts", "method", "path", "query" (raw query string), "headers" (lower-case names,
# repeated headers joined with ", "), "body" (parsed JSON, or null)}.
Record = tuple[float, str, str, str, tuple[tuple[bytes, bytes], ...], bytes]


def _body_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def render(record: Record) -> dict[str, Any]:
    ts, method, path, query, raw_headers, body = record
    headers: dict[str, str] = {}
    for name, value in raw_headers:
        key = name.decode("latin-1").lower()  # like the MCP test server: lower-case names
        val = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {val}" if key in headers else val
    return {"ts": ts, "method": method, "path": path, "query": query, "headers": headers,
            "body": _body_json(body)}


class Recorder:
    def __init__(self, enabled: bool = True, log_path: str | None = None,
                 limit: int = MAX_RECORDS) -> None:
        self.enabled = enabled
        self._records: deque[Record] = deque(maxlen=limit)
        self._log: IO[bytes] | None = open(log_path, "ab") if log_path else None

    @property
    def active(self) -> bool:
        return self.enabled or self._log is not None

    def add(self, method: str, path: str, query: str,
            raw_headers: tuple[tuple[bytes, bytes], ...], body: bytes) -> None:
        record = (time.time(), method, path, query, raw_headers, body)
        if self.enabled:
            self._records.append(record)
        if self._log is not None:
            self._log.write(orjson.dumps(render(record)) + b"\n")
            self._log.flush()

    def snapshot(self) -> list[dict[str, Any]]:
        return [render(r) for r in self._records]

    def clear(self) -> None:
        self._records.clear()

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
