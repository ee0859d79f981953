"""Configured tools resolved per request (pure: no I/O beyond reading secret files once)."""

from __future__ import annotations

import pytest

from gateway.config import parse_config
from gateway.identity import Identity
from gateway.schema.errors import ApiError
from gateway.tools import ConfiguredTools

USER = Identity(user_id="u", username="n", token="tok")


def tools_for(tmp_path, **config):
    secret = tmp_path / "secret"
    secret.write_text("Bearer from-file\n")
    servers = [{"name": "a", "url": "http://a", "authorization_headers": {"Authorization": str(secret)}},
               {"name": "b", "url": "http://b", "authorization_headers": {"X-Key": str(tmp_path / "missing")}}]
    return ConfiguredTools(parse_config({"name": "x", "llama_stack": {"url": "http://u"},
                                         "mcp_servers": servers, **config}))


def test_defaults_skip_unresolvable_server_and_move_authorization(tmp_path):
    tools = tools_for(tmp_path).for_request(None, None, USER, {})
    assert tools == [{"type": "mcp", "server_label": "a", "server_url": "http://a", "require_approval": "never",
                      "authorization": "from-file"}]


def test_no_tools_configured_means_no_tools_key(tmp_path):
    empty = ConfiguredTools(parse_config({"name": "x", "llama_stack": {"url": "http://u"}}))
    assert empty.for_request(None, "auto", USER, {}) is None
    assert empty.for_request([], "auto", USER, {}) == []


def test_tool_choice_none_wins_over_everything(tmp_path):
    assert tools_for(tmp_path).for_request([{"type": "function", "name": "f"}], "none", USER, {}) is None


def test_explicit_configured_server_gets_url_and_credentials(tmp_path):
    tool = tools_for(tmp_path).for_request([{"type": "mcp", "server_label": "a", "require_approval": "always",
                                             "headers": {"Authorization": "Bearer client"}}], None, USER, {})[0]
    assert tool == {"type": "mcp", "server_label": "a", "server_url": "http://a", "require_approval": "always",
                    "authorization": "from-file"}


def test_unconfigured_server_needs_a_url(tmp_path):
    with pytest.raises(ApiError) as caught:
        tools_for(tmp_path).for_request([{"type": "mcp", "server_label": "zzz"}], None, USER, {})
    assert caught.value.status == 422 and "tools[0].server_url" in caught.value.cause
