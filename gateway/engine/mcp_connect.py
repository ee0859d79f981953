"""The HTTP client the engine's MCP sessions use for a client-supplied server: every
connection it opens goes to an address `DestinationPolicy` checked.

httpx2 (which the `mcp` transports take) connects through httpcore2, whose connection
pool opens sockets through a network backend. `GuardedBackend` is that backend: it
resolves the host once, checks every address it resolved to, and connects to a checked
address (never resolving again, so DNS rebinding gains nothing). TLS still verifies
and sends SNI for the URL's host name: httpcore2 takes those from the request, not from
the socket. A redirect opens its connection through the same backend, so it is checked
too (the `mcp` transports follow only redirects within the server's origin anyway).
The client ignores proxy environment variables: through a proxy the check would judge
the proxy's address, not the server's.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any, AsyncIterator, Iterable

import httpcore2
import httpx2

from gateway.destinations import DestinationPolicy, ForbiddenDestination
from gateway.engine.mcp_types import ReadBudget


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of every MCP session's client: making one loads the CA bundle
    (~50 ms of CPU), and each MCP operation opens a client of its own."""
    return httpx2.create_ssl_context()


class RefusedConnection(httpcore2.ConnectError):
    """httpx2 reports it as a ConnectError whose cause is this; `reason` is for the model."""

    def __init__(self, reason: ForbiddenDestination):
        super().__init__(str(reason))
        self.reason = reason


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self, policy: DestinationPolicy):
        self._policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await self._policy.resolve(host, port)
        except ForbiddenDestination as refused:
            raise RefusedConnection(refused) from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore2.ConnectError as exc:  # the next checked address, as a resolver's list
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise RefusedConnection(ForbiddenDestination("MCP servers are reached over TCP only"))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a pool that connects through `GuardedBackend`.

    httpx2 takes no network backend argument, so the pool it built is replaced with one
    configured alike (tests/engine/test_mcp_connect.py proves a refused address is
    refused through this class, should httpx2 change its insides)."""

    def __init__(self, policy: DestinationPolicy):
        super().__init__(verify=tls_context(), trust_env=False)  # its own pool, replaced below
        self._pool = httpcore2.AsyncConnectionPool(ssl_context=tls_context(), network_backend=GuardedBackend(policy))


class TooLarge(httpx2.StreamError):
    """A response went past its `ReadBudget`. A StreamError: the `mcp` streamable HTTP
    transport answers the waiting request with an error at once, not after its timeout."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, budget: ReadBudget):
        self._inner = inner
        self._budget = budget

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._budget.limit:
                raise self._budget_spent()
            yield chunk

    def _budget_spent(self) -> TooLarge:
        self._budget.exceeded = True
        return TooLarge(f"the response is longer than {self._budget.limit} bytes")

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """Reads each response body only up to the budget's bytes (never buffering past
    it: a declared longer Content-Length fails before the body is read)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, budget: ReadBudget):
        self._inner = inner
        self._budget = budget

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        # httpx2 types a response's stream as sync or async; an async transport's is async.
        stream = _CappedStream(response.stream, self._budget)  # type: ignore[arg-type]
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._budget.limit:
            await stream.aclose()
            raise stream._budget_spent()
        response.stream = stream
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(policy: DestinationPolicy, headers: dict[str, str] | None = None,
                   timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None,
                   budget: ReadBudget | None = None) -> httpx2.AsyncClient:
    """An httpx2 client for a client-supplied server (the `mcp` transports' factory
    shape); with `budget`, its responses are read only up to its bytes each."""
    options: dict[str, Any] = {"headers": headers, "auth": auth}
    if timeout is not None:  # None would mean no timeout to httpx2, not its default
        options["timeout"] = timeout
    transport: httpx2.AsyncBaseTransport = GuardedTransport(policy)
    if budget is not None:
        transport = CappedTransport(transport, budget)
    return httpx2.AsyncClient(transport=transport, trust_env=False, **options)


def refusal_of(exc: BaseException) -> ForbiddenDestination | None:
    """The refusal behind an exception httpx2 or the `mcp` transports raised, if any."""
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RefusedConnection):
            return current.reason
        current = current.__cause__ or current.__context__
    return None
