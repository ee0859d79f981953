"""Capabilities: the upstream is probed once, however many turns wait for the answer."""

from __future__ import annotations

import asyncio
import logging

import orjson

from gateway.config import LlamaStackConfig
from gateway.upstream.capabilities import Capabilities
from gateway.upstream.client import Reply

ROUTES = {"data": [{"route": "/v1/responses", "method": "POST", "provider_types": ["inline::meta-reference"]}]}


class _Upstream:
    """Answers the route listing after a pause, so that many turns wait on one probe."""

    def __init__(self, routes: dict | None):
        self.calls: list[tuple[str, str]] = []
        self._routes = routes
        self.base_url = "http://upstream.invalid"

    async def request(self, method: str, path: str, **_: object) -> Reply:
        self.calls.append((method, path))
        await asyncio.sleep(0.01)
        if path == "/v1/inspect/routes" and self._routes is not None:
            return Reply(200, orjson.dumps(self._routes))
        return Reply(404, b"{}")


async def test_concurrent_first_turns_probe_and_log_once(caplog) -> None:
    upstream = _Upstream(ROUTES)
    capabilities = Capabilities(upstream, LlamaStackConfig(url="http://upstream.invalid"))  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gateway.upstream"):
        answers = await asyncio.gather(*(capabilities.uses_engine() for _ in range(20)))
    assert answers == [False] * 20
    assert upstream.calls == [("GET", "/v1/inspect/routes")]
    decided = [record.getMessage() for record in caplog.records if "llama_stack.api auto" in record.getMessage()]
    assert decided == ["llama_stack.api auto: turns are forwarded to the upstream's Responses API"]


async def test_an_upstream_without_responses_runs_turns_on_the_engine(caplog) -> None:
    upstream = _Upstream(None)   # not Llama Stack; POST /v1/responses is a 404
    capabilities = Capabilities(upstream, LlamaStackConfig(url="http://upstream.invalid"))  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gateway.upstream"):
        assert await capabilities.uses_engine() is True
        assert await capabilities.uses_engine() is True
    assert upstream.calls == [("GET", "/v1/inspect/routes"), ("POST", "/v1/responses")]
    decided = [record.getMessage() for record in caplog.records if "llama_stack.api auto" in record.getMessage()]
    assert decided == ["llama_stack.api auto: turns run on the local engine over /v1/chat/completions"]


async def test_a_configured_api_is_not_announced_as_auto(caplog) -> None:
    upstream = _Upstream(ROUTES)
    capabilities = Capabilities(upstream, LlamaStackConfig(url="http://upstream.invalid", api="responses"))  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="gateway.upstream"):
        assert await capabilities.uses_engine() is False
    assert not [record for record in caplog.records if "llama_stack.api auto" in record.getMessage()]
