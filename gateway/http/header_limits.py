"""Request header size: one limit (`service.max_header_bytes`, default 32 KiB, since real
JWTs with many group claims pass aiohttp's 8 KiB) answered with 431 in the error envelope
by the middleware, and aiohttp's own parser errors kept out of the logs' header values.

aiohttp's parser refuses a header line longer than its `max_field_size` with a 400 whose
log line quotes the first 100 bytes of the line: a bearer token's prefix. So the parser
is given a larger bound, max(2 x `max_header_bytes`, 64 KiB), and at most 64 headers:
a header between the limit and that bound gets the middleware's 431, beyond it the
parser's 400 (its log line rewritten by the filter below, without the value). The bound
is what a connection may make the process hold before its head is refused: it used to
be the request body limit (10 MB a line, 128 lines), and a few connections sending such
heads took hundreds of MB. How long a head may take is `gateway/http/server.py`'s.
The access line (`gateway/observability/access_log.py`) shows no header value at all."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from gateway.config import ServiceConfig


# Headers a request may carry: real clients and proxies send a few dozen at most.
MAX_HEADERS = 64
# The parser's per-line bound is never below this, whatever `max_header_bytes` is.
MIN_LINE_BOUND = 64 * 1024


def parser_limits(service: ServiceConfig) -> dict[str, Any]:
    """Keyword arguments for aiohttp's request handler (passed on to its parser)."""
    bound = max(2 * service.max_header_bytes, MIN_LINE_BOUND)
    return {"max_field_size": bound, "max_line_size": bound, "max_headers": MAX_HEADERS}


class ParserErrorsWithoutValues(logging.Filter):
    """Rewrites aiohttp's "Error handling request" records for malformed requests: the
    exception's text (which quotes the offending header) and traceback are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            client = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "refused a malformed request from %s: %s (HTTP %s; header values are not logged)"
            record.args = (client, exc.__class__.__name__, exc.code)
            record.exc_info = None
            record.exc_text = None
        return True


def install_log_filter() -> None:
    logging.getLogger("aiohttp.server").addFilter(ParserErrorsWithoutValues())
