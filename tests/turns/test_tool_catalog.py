"""`turns/tool_catalog.py`'s pure parts: LCORE's parameter list, its description
cleaning, the client-options body."""

from __future__ import annotations

from gateway.config import parse_config
from gateway.turns.tool_catalog import ToolCatalog, builtin_tools, clean_description, parameters_of
from gateway.turns.tools import ConfiguredTools


def test_parameters_of_a_json_schema():
    schema = {"type": "object", "required": ["a"],
              "properties": {"a": {"type": "integer", "description": "first"}, "b": {"default": "x"}}}
    assert parameters_of(schema) == [
        {"name": "a", "description": "first", "parameter_type": "integer", "required": True, "default": None},
        {"name": "b", "description": "", "parameter_type": "string", "required": False, "default": "x"}]
    assert parameters_of(None) == [] and parameters_of({"type": "object"}) == []


def test_clean_description():
    assert clean_description("Plain words.") == "Plain words."
    assert clean_description(None) == ""
    structured = "TOOL_NAME=x\nDISPLAY_NAME=X\n\nThis paragraph is the description a user reads.\n\nEXAMPLES=..."
    assert clean_description(structured) == "This paragraph is the description a user reads."
    assert clean_description("TOOL_NAME=x\nUSECASE=Counts things") == "Counts things"


def test_builtin_catalogue_is_lcores_two_tools():
    assert [tool["identifier"] for tool in builtin_tools()] == ["insert_into_memory", "file_search"]


def test_client_options_name_client_headers_only():
    config = parse_config({"name": "t", "llama_stack": {"url": "http://127.0.0.1:1"}, "mcp_servers": [
        {"name": "a", "url": "http://127.0.0.1:2/mcp", "authorization_headers": {"Authorization": "client"}},
        {"name": "b", "url": "http://127.0.0.1:3/mcp", "authorization_headers": {"Authorization": "oauth"}},
        {"name": "c", "url": "http://127.0.0.1:4/mcp"}]})
    assert ToolCatalog(ConfiguredTools(config)).client_options() == {
        "servers": [{"name": "a", "client_auth_headers": ["Authorization"]}]}
