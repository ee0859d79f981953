"""What the upstream can do, found out once and remembered.

Llama Stack lists its routes at `GET /v1/inspect/routes` (a route with no provider is
not served); other servers are probed with an empty `POST /v1/responses`, which a
server with the route refuses as invalid (400/422) and one without answers 404/405.
Whether the upstream keeps conversations is learnt on first use: a 404/405 on
`POST /v1/conversations` means the gateway keeps them itself. With `api: auto`, an
upstream without a Responses API gets the local engine (`uses_engine`).
"""

from __future__ import annotations

import asyncio
import logging

from gateway.config import LlamaStackConfig
from gateway.upstream.client import UpstreamClient

log = logging.getLogger("gateway.upstream")


class Capabilities:
    def __init__(self, client: UpstreamClient, config: LlamaStackConfig):
        self._client = client
        self._api = config.api
        self._conversations = config.conversations
        self.is_llama_stack: bool | None = None
        self.has_responses: bool | None = None
        self._lock = asyncio.Lock()

    async def probe(self) -> None:
        """Learn the upstream's shape (once; an unreachable upstream is retried next time)."""
        if self.is_llama_stack is not None:
            return
        async with self._lock:
            if self.is_llama_stack is not None:
                return
            reply = await self._client.request("GET", "/v1/inspect/routes")
            routes = reply.json().get("data") if reply.ok and reply.body.startswith(b"{") else None
            if isinstance(routes, list):
                self.has_responses = any(route.get("route") == "/v1/responses" and route.get("method") == "POST"
                                         and route.get("provider_types") for route in routes)
                self.is_llama_stack = True
            else:
                probe = await self._client.request("POST", "/v1/responses", json={})
                self.has_responses = probe.status not in (404, 405)
                self.is_llama_stack = False
            log.info("upstream %s: llama_stack=%s responses_api=%s", self._client.base_url,
                     self.is_llama_stack, self.has_responses)
            if self._api == "auto":   # here, once: not by every turn that waited for the probe
                log.info("llama_stack.api auto: turns %s", "are forwarded to the upstream's Responses API"
                         if self.has_responses else "run on the local engine over /v1/chat/completions")

    async def uses_engine(self) -> bool:
        """Whether turns run on the local engine (over Chat Completions) rather than
        being forwarded: `chat_completions` says so, `responses` says not, `auto` asks
        the upstream once whether it has a Responses API."""
        if self._api == "chat_completions":
            return True
        if self.is_llama_stack is None:
            await self.probe()
        return self._api == "auto" and not self.has_responses

    @property
    def conversations_upstream(self) -> bool | None:
        """True/False once known (or forced by config); None until first use."""
        if self._conversations == "upstream":
            return True
        if self._conversations == "gateway":
            return False
        return None

    def learn_conversations(self, available: bool) -> None:
        if self._conversations == "auto":
            self._conversations = "upstream" if available else "gateway"
            log.info("upstream conversations API %s: conversations are kept by the %s",
                     "found" if available else "absent", "upstream" if available else "gateway")
