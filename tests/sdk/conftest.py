"""The SDK against `gateway serve` in front of the scripted upstream, in both upstream
modes: forward (the upstream's /v1/responses; the upstream simulates MCP servers) and
the local engine (the gateway's loop over /v1/chat/completions; MCP calls reach the real
MCP server of tests/support/mcp_server.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_proc import Gateway
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK, running_mcp_server

MODES = ("forward", "engine")


@pytest.fixture(scope="session")
def sdk_mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "sdk-mcp")


@pytest.fixture(scope="session")
def sdk_gateways(gateway_factory, upstream, chat_upstream) -> dict[str, Gateway]:
    return {
        "forward": gateway_factory(upstream.url, keep=True, client_tools=CLIENT_MCP_ON_LOOPBACK),
        "engine": gateway_factory(chat_upstream.url, keep=True,
                                  **engine_config(chat_upstream.url, client_tools=CLIENT_MCP_ON_LOOPBACK)),
    }


@pytest.fixture(params=MODES)
def mode(request) -> str:
    return request.param


@pytest.fixture
def gw(sdk_gateways, mode) -> Gateway:
    return sdk_gateways[mode]


@pytest.fixture
def peer(upstream, chat_upstream, mode):
    """The scripted upstream the gateway of this mode talks to."""
    return upstream if mode == "forward" else chat_upstream


def sync_client(gateway: Gateway) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=gateway.base_url, api_key="test-token", max_retries=0, timeout=30)


def async_client(gateway: Gateway) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=gateway.base_url, api_key="test-token", max_retries=0, timeout=30)


def mcp_tool(url: str, approval: str = "always") -> dict[str, Any]:
    return {"type": "mcp", "server_label": "peer", "server_url": url, "require_approval": approval}
