"""aiohttp's parser errors are logged without the header values (the access line shows
none: tests/observability/test_access_log.py)."""

from __future__ import annotations

import logging
import sys

from aiohttp.http_exceptions import LineTooLong

from gateway.config import parse_config
from gateway.http.header_limits import ParserErrorsWithoutValues, parser_limits


def test_parser_error_records_lose_the_header_value():
    try:
        raise LineTooLong(b"Bearer eyJsecret-token-prefix...", 8190)
    except LineTooLong:
        exc_info = sys.exc_info()
    record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s",
                               ("127.0.0.1",), exc_info)
    assert ParserErrorsWithoutValues().filter(record)
    text = logging.Formatter().format(record)
    assert "eyJsecret" not in text and "LineTooLong" in text and "127.0.0.1" in text


def test_other_records_are_untouched():
    record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "something %s", ("else",), None)
    assert ParserErrorsWithoutValues().filter(record) and record.getMessage() == "something else"


def test_the_parser_bound_is_twice_the_limit_and_at_least_64_kib():
    def limits(max_header_bytes: int) -> dict:
        return parser_limits(parse_config({"name": "x", "llama_stack": {"url": "http://127.0.0.1:1"},
                                           "service": {"max_header_bytes": max_header_bytes}}).service)

    # Never the body limit (10 MB): that is what a head could make the process hold.
    assert limits(65536) == {"max_field_size": 131072, "max_line_size": 131072, "max_headers": 64}
    assert limits(1024) == {"max_field_size": 65536, "max_line_size": 65536, "max_headers": 64}
