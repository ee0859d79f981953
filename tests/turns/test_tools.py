"""Configured tools resolved per request (pure: no I/O beyond reading secret files once)."""

from __future__ import annotations

import pytest

from gateway.config import parse_config
from gateway.identity import Identity
from gateway.schema.errors import ApiError
from gateway.turns.tools import MERGE_HEADER, ConfiguredTools

USER = Identity(user_id="u", username="n", token="tok")
STORES = [{"rag_id": "handbook", "vector_db_id": "vs_handbook"}, {"rag_id": "faq", "vector_db_id": "vs_faq"}]


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


def test_labels_and_urls_for_request_validation(tmp_path):
    tools = tools_for(tmp_path)
    assert tools.labels == {"a", "b"} and tools.server_urls == {"a": "http://a", "b": "http://b"}


@pytest.mark.parametrize("asked, sent", [(["handbook"], ["vs_handbook"]), (["vs_faq", "faq"], ["vs_faq", "vs_faq"])])
def test_file_search_reaches_configured_stores_by_rag_id_or_store_id(tmp_path, asked, sent):
    tool = tools_for(tmp_path, byok_rag=STORES).for_request(
        [{"type": "file_search", "vector_store_ids": asked}], None, USER, {})[0]
    assert tool["vector_store_ids"] == sent


@pytest.mark.parametrize("byok", [[], STORES])
def test_file_search_refuses_other_stores(tmp_path, byok):
    with pytest.raises(ApiError) as caught:
        tools_for(tmp_path, byok_rag=byok).for_request(
            [{"type": "file_search", "vector_store_ids": ["vs_handbook", "vs_other_tenant"]}], None, USER, {})
    assert caught.value.status == 404
    assert caught.value.cause == ("Vector store with ID vs_other_tenant does not exist" if byok
                                  else "Vector store with ID vs_handbook does not exist")


def test_file_search_over_any_store_when_allowed(tmp_path):
    tools = tools_for(tmp_path, client_tools={"allow_unconfigured_vector_stores": True})
    tool = tools.for_request([{"type": "file_search", "vector_store_ids": ["vs_x"]}], None, USER, {})[0]
    assert tool["vector_store_ids"] == ["vs_x"]


def test_merge_header_appends_configured_tools_after_the_clients(tmp_path):
    function = {"type": "function", "name": "f", "parameters": {}}
    tools = tools_for(tmp_path, byok_rag=STORES).for_request([function], None, USER, {MERGE_HEADER: "TRUE"})
    assert [tool["type"] for tool in tools] == ["function", "file_search", "mcp"]
    assert tools_for(tmp_path).for_request([function], None, USER, {MERGE_HEADER: "false"}) == [function]


@pytest.mark.parametrize("client_tool, cause", [
    ({"type": "mcp", "server_label": "a"}, "Client MCP tool with server_label 'a' conflicts with a server-configured "
                                           "MCP tool. Rename the client tool to avoid the conflict."),
    ({"type": "file_search", "vector_store_ids": ["faq"]},
     "Client file_search tool conflicts with a server-configured file_search tool. Remove the client file_search "
     "to use the server's configuration."),
])
def test_merge_conflicts_are_409(tmp_path, client_tool, cause):
    with pytest.raises(ApiError) as caught:
        tools_for(tmp_path, byok_rag=STORES).for_request([client_tool], None, USER, {MERGE_HEADER: "true"})
    assert caught.value.status == 409 and caught.value.body(openai=False) == {
        "detail": {"response": "Tool conflict", "cause": cause}}


@pytest.mark.parametrize("operator, client, sent", [
    ("always", "never", "always"),
    ({"always": ["add"], "never": ["echo"]}, {"never": ["add", "echo"]}, {"always": ["add"], "never": ["echo"]}),
    ("never", "always", "always"),
])
def test_a_client_only_tightens_the_operators_approval(tmp_path, operator, client, sent):
    config = {"name": "x", "llama_stack": {"url": "http://u"},
              "mcp_servers": [{"name": "a", "url": "http://a", "require_approval": operator}]}
    tool = ConfiguredTools(parse_config(config)).for_request(
        [{"type": "mcp", "server_label": "a", "require_approval": client}], None, USER, {})[0]
    assert tool["require_approval"] == sent


@pytest.mark.parametrize("client_tools", [{}, {"allow_unconfigured_mcp_servers": True}])
def test_a_connector_under_an_unconfigured_label_is_a_clients_server(tmp_path, client_tools):
    connector = {"type": "mcp", "server_label": "mine", "connector_id": "connector_dropbox"}
    tools = tools_for(tmp_path, client_tools=client_tools)
    if not client_tools:
        with pytest.raises(ApiError) as caught:
            tools.for_request([connector], None, USER, {})
        assert caught.value.status == 422 and caught.value.code == "mcp_server_not_allowed"
    else:
        assert tools.for_request([connector], None, USER, {}) == [connector]
    with pytest.raises(ApiError) as caught:  # with a URL, the URL is judged as any client server's
        tools.for_request([{**connector, "server_url": "http://169.254.169.254/mcp"}], None, USER, {})
    assert caught.value.code == ("mcp_server_forbidden" if client_tools else "mcp_server_not_allowed")


def test_a_configured_server_named_with_a_connector_keeps_the_operators_url(tmp_path):
    tool = tools_for(tmp_path).for_request([{"type": "mcp", "server_label": "a", "connector_id": "connector_x"}],
                                           None, USER, {})[0]
    assert "connector_id" not in tool and tool["server_url"] == "http://a" and tool["authorization"] == "from-file"


def test_the_gateways_own_mcp_requests_carry_what_resolves(tmp_path):
    from gateway.turns.tools import on_the_wire

    secret = tmp_path / "token"
    secret.write_text("bare-token\n")
    servers = [{"name": "c", "url": "http://c", "headers": ["X-Tenant", "X-Region"],
                "authorization_headers": {"Authorization": str(secret), "X-Api-Key": "client"}}]
    tools = ConfiguredTools(parse_config({"name": "x", "llama_stack": {"url": "http://u"}, "mcp_servers": servers}))
    server = tools.servers[0]
    # The forwarded headers the request has, and the credentials that resolve.
    assert tools._sent_headers(server, USER, {"X-Tenant": "acme"}) == {"X-Tenant": "acme",
                                                                       "Authorization": "Bearer bare-token"}
    sent = tools._sent_headers(server, USER, {"X-Tenant": "acme", "MCP-HEADERS": '{"c": {"X-Api-Key": "k"}}'})
    assert sent == {"X-Tenant": "acme", "Authorization": "Bearer bare-token", "X-Api-Key": "k"}
    assert on_the_wire({"authorization": "Basic x", "Authorization": "t", "X-Tenant": "t"}) == {
        "authorization": "Basic x", "Authorization": "Bearer t", "X-Tenant": "t"}
