"""A JSON-over-HTTP endpoint the engine calls for a tool or a check (the web search
endpoint, the moderation endpoint), on the gateway's own upstream client
(`upstream/client.py`: kept-alive connections, idle-gap timeouts).

`post()` is bounded as a whole by the service's timeout (the client's timeouts are per
idle gap, so a server that trickles bytes would otherwise hold a turn). Failures are
two kinds, because callers treat them differently: `ServiceUnavailable` (no connection,
no answer in time, a 5xx, a body that is not JSON, or a server without the endpoint:
a bare 404 `Not Found` / 405, as vLLM (FastAPI) answers for a moderation API it lacks)
and `ServiceRefused` (any other 4xx: the request itself was wrong, e.g. an unknown
moderation model).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from gateway.config import LlamaStackConfig
from gateway.redaction import Redactor
from gateway.schema.errors import ApiError
from gateway.upstream.breaker import DEFAULT_CIRCUIT, CircuitBreaker, failures, open_circuit
from gateway.upstream.client import TIMED_OUT, UpstreamClient
from gateway.upstream.errors import upstream_message

log = logging.getLogger("gateway.engine")


class ServiceUnavailable(Exception):
    """The endpoint could not be used (the message is safe to show: no URL, no key)."""


class ServiceRefused(Exception):
    """The endpoint answered 4xx; `message` is its own error message when it gave one."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class JsonService:
    def __init__(self, client: UpstreamClient, path: str, timeout: float, name: str, owned: bool = False):
        self._client = client
        self._path = path
        self._timeout = timeout
        self.name = name          # how messages name it ("the web search service")
        self._owned = owned       # a client of its own, started and closed here

    @classmethod
    def at(cls, url: str, api_key: str | None, timeout: float, name: str,
           circuit: tuple[int, float] = DEFAULT_CIRCUIT) -> "JsonService":
        """A service at its own URL (the whole endpoint, path included), with its own key
        and its own circuit breaker (`circuit`: the failures in a row that open it, 0: none,
        and its cooldown; the `llama_stack.circuit_breaker_*` settings)."""
        client = UpstreamClient(LlamaStackConfig(url=url, api_key=api_key, timeout=timeout, max_retries=0,
                                                 display_name=name, circuit_breaker_failures=circuit[0],
                                                 circuit_breaker_cooldown_seconds=circuit[1]),
                                redact=Redactor([api_key or ""]).text)
        # The client puts its base path before every request path: the endpoint is the base.
        return cls(client, "" if client.base_url.split("://", 1)[1].count("/") else "/", timeout, name, owned=True)

    def breakers(self) -> list[CircuitBreaker]:
        """Its own client's circuit (one on the shared upstream is reported with it)."""
        breaker = self._client.breaker
        return [breaker] if self._owned and breaker is not None else []

    async def start(self) -> None:
        if self._owned:
            await self._client.start()

    async def close(self) -> None:
        if self._owned:
            await self._client.close()

    async def post(self, body: dict[str, Any]) -> Any:
        """The endpoint's JSON answer to `body`. Raises ServiceUnavailable / ServiceRefused."""
        failed_before = failures(self._client.breaker)
        try:
            async with asyncio.timeout(self._timeout):
                reply = await self._client.request("POST", self._path, json=body, timeout=self._timeout)
        except TimeoutError:
            raise ServiceUnavailable(f"{self.name} did not answer within {self._timeout:g} s") from None
        except ApiError as exc:  # the client's 503: no connection, or silent past the timeout (logged there)
            refused = open_circuit(self._client.breaker, failed_before)
            if refused:
                raise ServiceUnavailable(f"{self.name} {refused}") from None
            if exc.cause == TIMED_OUT:   # the client's own read timeout came first (the same timeout)
                raise ServiceUnavailable(f"{self.name} did not answer within {self._timeout:g} s") from None
            raise ServiceUnavailable(f"{self.name} could not be reached") from None
        if 400 <= reply.status < 500:
            message = self._client.redact(upstream_message(reply.body))[:500]
            if reply.status in (404, 405) and message.rsplit(": ", 1)[-1] in ("Not Found", "Method Not Allowed"):
                raise ServiceUnavailable(f"{self.name} has no such endpoint (HTTP {reply.status})")
            raise ServiceRefused(reply.status, message)
        if not reply.ok:
            log.warning("%s answered HTTP %d: %s", self.name, reply.status, reply.body[:300])
            raise ServiceUnavailable(f"{self.name} failed (HTTP {reply.status})")
        try:
            return orjson.loads(reply.body)
        except orjson.JSONDecodeError:
            raise ServiceUnavailable(f"{self.name} answered something that is not JSON") from None

