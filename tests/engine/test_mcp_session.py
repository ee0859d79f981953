"""What an MCP session's failures mean: OpenAI's error objects, without the server's
address or the exception's text where they could leak either."""

from __future__ import annotations

import pytest

from gateway.engine import mcp_session
from gateway.engine.mcp import McpServer
from gateway.engine.mcp_session import error_of

SERVER = McpServer("calc", "http://127.0.0.1:1/mcp", {"Authorization": "Bearer t"}, 5)


class Boom(Exception):
    pass


@pytest.mark.parametrize("exc, expected", [
    (mcp_session.MCPError(-32602, "bad"), {"type": "mcp_protocol_error", "code": -32602, "message": "bad"}),
    (OSError("refused"), {"type": "http_error", "code": 0, "message": "MCP server 'calc' is unreachable"}),
    (Boom("x"), {"type": "http_error", "code": 0, "message": "MCP server 'calc' failed: Boom"}),
])
def test_failures_become_openai_error_objects(exc, expected):
    assert error_of(SERVER, exc) == expected
