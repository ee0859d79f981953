"""aiohttp's parser errors are logged without the header value they quote."""

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


def test_the_parser_accepts_up_to_the_body_limit():
    config = parse_config({"name": "x", "llama_stack": {"url": "http://127.0.0.1:1"},
                           "service": {"max_header_bytes": 65536, "max_request_body_bytes": 1048576}})
    assert parser_limits(config.service) == {"max_field_size": 1048576, "max_line_size": 1048576}
