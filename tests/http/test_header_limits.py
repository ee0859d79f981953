"""aiohttp's parser errors and access log lines are logged without the header values."""

from __future__ import annotations

import logging
import re
import sys

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.test_utils import make_mocked_request
from aiohttp.web_log import AccessLogger

from gateway.config import parse_config
from gateway.http.header_limits import AccessLogWithShortHeaders, ParserErrorsWithoutValues, parser_limits


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


def access_lines(logger_class, user_agent: str) -> list[logging.LogRecord]:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger(f"test.access.{logger_class.__name__}")
    logger.setLevel(logging.INFO)
    def keep(record: logging.LogRecord) -> bool:
        records.append(record)
        return False

    logger.addFilter(keep)
    request = make_mocked_request("GET", "/v1/models?x=1", headers={"User-Agent": user_agent, "Referer": "r"})
    try:
        logger_class(logger, AccessLogger.LOG_FORMAT).log(request, web.Response(status=431), 0.5)
    finally:
        logger.removeFilter(keep)
    return records


def test_the_access_log_is_aiohttps_with_header_values_cut():
    def untimed(record: logging.LogRecord) -> str:  # the two lines may straddle a second
        return re.sub(r"\[[^]]*\]", "[t]", record.getMessage())

    same = access_lines(AccessLogWithShortHeaders, "curl/8")[0]
    assert untimed(same) == untimed(access_lines(AccessLogger, "curl/8")[0])
    assert untimed(same) == '- [t] "GET /v1/models?x=1 HTTP/1.1" 431 0 "r" "curl/8"'
    cut = access_lines(AccessLogWithShortHeaders, "S" * 40_000)[0]
    assert '"r" "' + "S" * 128 + '...(40000 chars)"' in cut.getMessage() and len(cut.getMessage()) < 400
    assert cut.request_header == {"Referer": "r", "User-Agent": "S" * 128 + "...(40000 chars)"}
