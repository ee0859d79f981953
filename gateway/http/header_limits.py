"""Request header size: one limit (`service.max_header_bytes`, default 32 KiB, since real
JWTs with many group claims pass aiohttp's 8 KiB) answered with 431 in the error envelope
by the middleware, and aiohttp's own parser errors kept out of the logs' header values.

aiohttp's parser refuses a header line longer than its `max_field_size` with a 400 whose
log line quotes the first 100 bytes of the line: a bearer token's prefix. So the parser
is given a larger bound (the request body limit: a request may already carry that much),
the middleware answers 431 above the configured limit, and the rare request beyond the
parser's bound is logged by the filter below without the value."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from gateway.config import ServiceConfig


def parser_limits(service: ServiceConfig) -> dict[str, Any]:
    """Keyword arguments for `web.run_app` (passed on to aiohttp's request parser)."""
    bound = max(service.max_header_bytes, service.max_request_body_bytes)
    return {"max_field_size": bound, "max_line_size": bound}


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
