"""The tools' sections: MCP servers (URL shape, approval as a word or a filter), the
client tools' destination exceptions (CIDRs or host names, nothing else), the
web_search and guardrails endpoints; every refusal names its key. (byok_rag's rules:
test_config.py; what the tools become for a request: tests/turns/test_tools.py.)"""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.config.tools import ApprovalFilter

MINIMAL = {"name": "x", "llama_stack": {"url": "http://upstream:8321"}}


def problems(**sections) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config({**MINIMAL, **sections})
    return caught.value.problems


def test_an_mcp_servers_approval_is_a_word_or_a_filter():
    config = parse_config({**MINIMAL, "mcp_servers": [
        {"name": "a", "url": "http://a:8000/mcp"},
        {"name": "b", "url": "https://b/mcp", "require_approval": "always"},
        {"name": "c", "url": "https://c/mcp", "require_approval": {"never": ["read"], "always": ["write"]}}]})
    a, b, c = config.mcp_servers
    assert (a.require_approval, b.require_approval) == ("never", "always")
    assert c.require_approval == ApprovalFilter(always=["write"], never=["read"])
    assert [p.split(":")[0] for p in problems(mcp_servers=[{"name": "a", "url": "a:8000"}])] == ["mcp_servers[0].url"]
    assert any(p.startswith("mcp_servers[0].require_approval")
               for p in problems(mcp_servers=[{"name": "a", "url": "http://a", "require_approval": "sometimes"}]))


def test_server_names_are_unique():
    assert any("mcp_servers names must be unique" in p for p in problems(
        mcp_servers=[{"name": "a", "url": "http://a"}, {"name": "a", "url": "http://b"}]))


def test_destination_exceptions_are_cidrs_or_host_names():
    config = parse_config({**MINIMAL, "client_tools": {
        "allowed_mcp_destinations": ["10.20.0.0/16", "fd00::/8", "mcp.internal.example"],
        "allowed_image_destinations": ["192.168.1.7"]}})
    assert config.client_tools.allowed_mcp_destinations[1] == "fd00::/8"
    for bad, says in (("10.20.0.0/33", "is not a valid CIDR"), ("http://x.example", "is not a valid CIDR"),
                      ("a b", "must be CIDRs or host names"), ("*.example", "must be CIDRs or host names")):
        [problem] = problems(client_tools={"allowed_mcp_destinations": [bad]})
        assert problem.startswith("client_tools.allowed_mcp_destinations") and says in problem, problem


def test_search_and_moderation_endpoints_are_http_urls():
    config = parse_config({**MINIMAL, "web_search": {"url": "https://search.example/api"},
                           "guardrails": {}})
    assert config.web_search is not None and config.web_search.max_results == 5
    assert config.guardrails.moderation_url is None and config.guardrails.fail_open is False
    assert problems(web_search={"url": "search:80"})[0].startswith("web_search.url")
    assert problems(guardrails={"moderation_url": "ftp://m"})[0].startswith("guardrails.moderation_url")
    assert problems(web_search={"url": "http://s", "max_results": 51})[0].startswith("web_search.max_results")
