"""The gateway's client of the upstream: requests rendered once, connections kept alive
(`http11.Pool`), timeouts, retries and error mapping.

Timeouts are per idle gap, not per request, so a long stream that keeps sending is never
cut. Retries happen only when the upstream cannot have run the request (no connection
could be made, a 429 or 503, a 502 or 504 of an idempotent request: `retry.py`) and
before the caller read anything of the answer (a kept-alive connection the upstream had
already closed is retried inside `http11`: the request never reached it). The circuit
breaker of the base URL (`breaker.py`) refuses requests at once while it is open.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Mapping
from urllib.parse import urlencode, urlsplit

import orjson

from gateway import outbound
from gateway.config import LlamaStackConfig
from gateway.request_scope import REQUEST, TURN_DEADLINE
from gateway.schema.errors import ApiError, shutting_down, upstream_unavailable
from gateway.upstream.breaker import CLOSED, FAILING_STATUSES, CircuitBreaker
from gateway.upstream.errors import map_upstream_error
from gateway.upstream.http11 import (ConnectFailed, Exchange, Interrupted, Pool, ReadTimeout, TurnDeadline,
                                     UpstreamHttpError)
from gateway.upstream.retry import RETRIED_STATUSES, may_retry_status, next_wait, retry_after

log = logging.getLogger("gateway.upstream")

# Idle upstream connections are closed after this long: each holds a socket and its
# buffers, and after a burst 30 s kept them all. Under steady load a connection is
# reused well within it (Llama Stack's uvicorn keeps an idle connection for 5 s).
KEEPALIVE_S = 3.0
# The cause of the 503 for an upstream that did not answer in time (the OpenAI client's words).
TIMED_OUT = "Request timed out."


class UpstreamHooks:
    """An observer of upstream requests (metrics): one call per request when its answer's
    head arrived or it failed, one per retry; never per read."""

    def answered(self, path: str, status: int, seconds: float) -> None:
        """The answer's head arrived."""

    def failed(self, path: str, outcome: str, seconds: float) -> None:
        """No answer: `connect_error` or `timeout`."""

    def retried(self, path: str, outcome: str) -> None:
        """A connection could not be made; the request is tried again."""


@dataclass
class Reply:
    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return orjson.loads(self.body)


class UpstreamClient:
    def __init__(self, config: LlamaStackConfig, redact: Callable[[str], str] | None = None):
        self.base_url = config.url.rstrip("/")
        # What the upstream's error messages go through before a client sees them: out
        # with the credentials and URLs the gateway sent (gateway/redaction.py).
        self.redact: Callable[[str], str] = redact or _unchanged
        self.display_name = config.display_name
        self._config = config
        url = urlsplit(self.base_url)
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._tls = ssl.create_default_context() if url.scheme == "https" else None
        self._base_path = url.path
        default_port = self._port == (443 if self._tls else 80)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._fixed_headers = {"Host": host if default_port else f"{host}:{self._port}",
                               "User-Agent": f"lightspeed-gateway/{_version()}", "Accept": "*/*"}
        if config.api_key:
            self._fixed_headers["Authorization"] = f"Bearer {config.api_key}"
        self._heads: dict[tuple[str, str], bytes] = {}  # rendered once per fixed endpoint
        self._pool: Pool | None = None
        self._interrupted = False   # shutting down, the grace over: no new exchange starts
        self._deadlines = bool(config.turn_deadline_seconds)   # turns carry a deadline (request_scope.py)
        self.hooks: UpstreamHooks | None = None   # set by the wiring when metrics are on
        # The circuit of this base URL (`upstream/breaker.py`); None: off.
        self.breaker: CircuitBreaker | None = None
        if config.circuit_breaker_failures:
            self.breaker = CircuitBreaker(self.base_url, config.circuit_breaker_failures,
                                          config.circuit_breaker_cooldown_seconds)
        # Header lines (`Name: value\r\n`) for one request, asked for just before it is
        # sent: the trace context (gateway/observability/tracing.py); None: tracing off.
        self.outgoing: Callable[[str, str], bytes] | None = None
        outbound.client_made(self)   # tracing on: every client's calls carry the trace (gateway/outbound.py)

    async def start(self) -> None:
        self._pool = Pool(self._host, self._port, self._tls, limit=self._config.max_connections,
                          connect_timeout=min(self._config.timeout, 10), idle_s=KEEPALIVE_S)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def connections(self) -> tuple[int, int] | None:
        """The pool's connections (busy, idle); None before `start()`."""
        return self._pool.counts() if self._pool is not None else None

    def interrupt(self) -> int:
        """The end of a shutdown's grace period: every exchange in progress fails (a
        stream ends with `response.failed`, a JSON turn with the shutdown's 503) and no
        new one starts. How many were interrupted."""
        self._interrupted = True
        return self._pool.interrupt(Interrupted("The gateway is shutting down.")) if self._pool is not None else 0

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None, params: Mapping[str, str] | None = None,
                      timeout: float | None = None) -> Reply:
        """Send a request and read the whole answer; any status is returned, not raised."""
        exchange = await self.open(method, path, json=json, headers=headers, params=params, timeout=timeout)
        try:
            return Reply(exchange.status, await exchange.read())
        except UpstreamHttpError as exc:
            exchange.close()
            raise self._unavailable(method, path, exc) from None
        except BaseException:
            exchange.close()
            raise

    async def request_ok(self, method: str, path: str, *, model: str | None = None, **kwargs: Any) -> Reply:
        """Like `request`, but a non-2xx answer raises the mapped `ApiError`."""
        reply = await self.request(method, path, **kwargs)
        if not reply.ok:
            raise self.error(reply.status, reply.body, model)
        return reply

    def error(self, status: int, body: bytes, model: str | None = None) -> ApiError:
        """The error for an upstream's non-2xx answer, its message redacted."""
        return map_upstream_error(status, body, model, self.redact)

    async def open(self, method: str, path: str, *, json: Any = None, headers: Mapping[str, str] | None = None,
                   params: Mapping[str, str] | None = None, timeout: float | None = None) -> Exchange:
        """The exchange once the answer's head arrived, its body unread (for streams: the
        caller reads it, then releases or closes the exchange). Connection failures are
        retried, then mapped."""
        assert self._pool is not None, "UpstreamClient.start() was not called"
        if self._interrupted:
            raise shutting_down()
        ends_at = 0.0
        if self._deadlines:
            ends_at = TURN_DEADLINE.get()
            if ends_at and self._pool.loop.time() >= ends_at:
                raise self._unavailable(method, path, TurnDeadline("the turn's deadline passed"))
        body = orjson.dumps(json) if json is not None else b""
        length = len(body) if json is not None else (0 if method in ("POST", "PUT", "PATCH") else None)
        data = self._head(method, path, params, headers, length) + body
        read_timeout = min(timeout, self._config.timeout) if timeout else self._config.timeout
        attempt = 0
        hooks = self.hooks
        breaker = self.breaker
        if breaker is not None and breaker.state != CLOSED and not breaker.allow():
            # Refused without touching the upstream (LCORE's 503, as for a refused connection).
            if hooks is not None:
                hooks.failed(path, "circuit_open", 0.0)
            raise upstream_unavailable(self.display_name)
        started = time.perf_counter() if hooks is not None else 0.0
        first = time.monotonic()   # the first attempt: retries start within the budget from it
        while True:
            try:
                exchange = await self._pool.exchange(data, read_timeout, ends_at)
            except ConnectFailed as exc:
                delay = self._retry_wait(attempt, None, first)
                if delay is None:
                    if hooks is not None:
                        hooks.failed(path, _outcome(exc), time.perf_counter() - started)
                    if breaker is not None:
                        breaker.failed(_describe(exc))
                    raise self._unavailable(method, path, exc) from None
                attempt += 1
                if hooks is not None:
                    hooks.retried(path, _outcome(exc))
                log.warning("upstream %s %s: %s; retry %d in %.1fs", method, path, _describe(exc), attempt, delay)
                await asyncio.sleep(delay)
            except UpstreamHttpError as exc:
                if hooks is not None:
                    hooks.failed(path, _outcome(exc), time.perf_counter() - started)
                if breaker is not None and not isinstance(exc, Interrupted):
                    breaker.failed(_describe(exc))
                raise self._unavailable(method, path, exc) from None
            except BaseException:   # cancelled: its caller left; a probe's verdict is still open
                if breaker is not None:
                    breaker.released()
                raise
            else:
                status = exchange.status
                if status in RETRIED_STATUSES and attempt < self._config.max_retries \
                        and may_retry_status(method, status):
                    # Nothing of it reached the caller yet: asked again if the budget allows.
                    delay = self._retry_wait(attempt, retry_after(exchange.retry_after), first)
                    if delay is not None:
                        exchange.close()
                        attempt += 1
                        if hooks is not None:
                            hooks.retried(path, f"status_{status}")
                        log.warning("upstream %s %s answered %d; retry %d in %.1fs", method, path, status, attempt,
                                    delay)
                        await asyncio.sleep(delay)
                        continue
                if hooks is not None:
                    hooks.answered(path, status, time.perf_counter() - started)
                if breaker is not None:
                    if status in FAILING_STATUSES:
                        breaker.failed(f"HTTP {status}")
                    elif breaker.failures or breaker.state != CLOSED:
                        breaker.succeeded()
                return exchange

    def _retry_wait(self, attempt: int, asked: float | None, first: float) -> float | None:
        """The wait before the next attempt, or None: no more (`upstream/retry.py`)."""
        config = self._config
        if attempt >= config.max_retries:
            return None
        return next_wait(config.retry_delay, attempt + 1, asked,
                         config.retry_budget_seconds - (time.monotonic() - first))

    def _head(self, method: str, path: str, params: Mapping[str, str] | None, headers: Mapping[str, str] | None,
              length: int | None) -> bytes:
        """The request line and headers, up to and including the blank line."""
        key = (method, path)
        fixed = self._heads.get(key) if not params and not headers else None
        if fixed is None:
            target = self._base_path + path + (f"?{urlencode(list(params.items()))}" if params else "")
            lines = [f"{method} {target} HTTP/1.1"]
            for name, value in ({**self._fixed_headers, **headers} if headers else self._fixed_headers).items():
                if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                    raise ValueError(f"header {name!r} has a line break")
                lines.append(f"{name}: {value}")
            fixed = ("\r\n".join(lines) + "\r\n").encode("latin-1")
            if not params and not headers and len(self._heads) < 64:  # fixed endpoints, not every id
                self._heads[key] = fixed
        rid = REQUEST.get()[0]   # the request this call is for: both sides' logs then name it
        if rid:
            fixed = b"%sX-Request-ID: %s\r\n" % (fixed, rid.encode("latin-1"))
        if self.outgoing is not None:
            fixed += self.outgoing(method, path)
        if length is None:
            return fixed + b"\r\n"
        return b"%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (fixed, length)

    def _unavailable(self, method: str, path: str, exc: BaseException) -> ApiError:
        """LCORE's 503 (`Connection error.`, or `Request timed out.` as the OpenAI client
        says); what the socket said goes to the log, not to the client."""
        if isinstance(exc, TurnDeadline):
            log.warning("upstream %s %s: %s", method, path, exc)
            error = upstream_unavailable(self.display_name, TIMED_OUT)
        elif isinstance(exc, Interrupted):
            error = shutting_down()
        else:
            log.warning("upstream %s %s unreachable: %s", method, path, _describe(exc))
            error = upstream_unavailable(self.display_name, TIMED_OUT if isinstance(exc, ReadTimeout)
                                         else "Connection error.")
        # Sent, then lost (not a connection that could not be made): the upstream may be running it.
        error.upstream_received = not isinstance(exc, ConnectFailed)
        return error


def _unchanged(text: str) -> str:
    return text


def _outcome(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, ReadTimeout) else "connect_error"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ReadTimeout):
        return f"The upstream did not answer in time ({exc})."
    return f"Connection error: {exc}."


def _version() -> str:
    try:
        return version("gateway")
    except PackageNotFoundError:
        return "0"


__all__ = ["ApiError", "Reply", "UpstreamClient"]
