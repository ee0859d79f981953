"""Redactor: what the gateway injected, out of the upstream's words (pure)."""

from __future__ import annotations

from gateway.config import parse_config
from gateway.redaction import NOTHING, Redactor
from gateway.upstream.errors import map_upstream_error

REDACTOR = Redactor(["s3cret-token", "Bearer s3cret-token", "ab"], {"calc": "http://10.0.0.5:8080/mcp/"})


def test_credentials_and_configured_urls_are_replaced():
    text = ("Failed to connect to MCP server at http://10.0.0.5:8080/mcp: refused; host 10.0.0.5:8080 "
            "with Authorization: Bearer s3cret-token")
    assert REDACTOR.text(text) == ("Failed to connect to MCP server at [MCP server 'calc']: refused; host "
                                   "[MCP server 'calc'] with Authorization: [redacted]")


def test_a_longer_port_and_short_values_are_left_alone():
    assert REDACTOR.text("10.0.0.5:80801 ab cd") == "10.0.0.5:80801 ab cd"
    assert NOTHING.text("anything s3cret-token") == "anything s3cret-token" and not NOTHING


def test_response_error_and_item_errors_in_place():
    response = {"error": {"code": "server_error", "message": "bad s3cret-token"}, "output": [
        {"type": "mcp_call", "error": "at http://10.0.0.5:8080/mcp/"},
        {"type": "mcp_call", "error": {"type": "mcp_tool_execution_error",
                                       "content": [{"type": "text", "text": "s3cret-token"}]}},
        {"type": "mcp_call", "error": {"type": "http_error", "code": 0, "message": "s3cret-token"}}]}
    REDACTOR.response(response)
    assert response == {"error": {"code": "server_error", "message": "bad [redacted]"}, "output": [
        {"type": "mcp_call", "error": "at [MCP server 'calc']"},
        {"type": "mcp_call", "error": {"type": "mcp_tool_execution_error",
                                       "content": [{"type": "text", "text": "[redacted]"}]}},
        {"type": "mcp_call", "error": {"type": "http_error", "code": 0, "message": "[redacted]"}}]}


def test_of_a_configuration(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("Bearer file-token-1\n")
    config = parse_config({"name": "x", "llama_stack": {"url": "http://u", "api_key": "upstream-key"},
                           "mcp_servers": [{"name": "calc", "url": "https://calc.internal/mcp"}]})
    redactor = Redactor.of(config, {"calc": {"Authorization": "Bearer file-token-1"}})
    assert redactor.text("upstream-key file-token-1 https://calc.internal/mcp calc.internal") == \
        "[redacted] [redacted] [MCP server 'calc'] [MCP server 'calc']"


def test_upstream_error_bodies_are_redacted():
    error = map_upstream_error(400, b'{"detail": "token s3cret-token refused"}', redact=REDACTOR.text)
    assert error.status == 400 and error.cause == "token [redacted] refused"
