"""Two gateways on PostgreSQL and a scripted workload that moves every series the
dashboard (grafana/dashboards/gateway.json) draws, the rare ones included: failed
authentications (401), quota refusals (429), invalid requests (422), upstream failures
(5xx), tool errors and an unreachable MCP server. Used by tests/e2e/test_prometheus.py
and scripts/dashboard_picture.py.

- `forward`: the forward backend in front of the scripted Responses upstream, with
  api-key-token authentication, a user limiter and a cluster limiter, background runs,
  LCORE's query API (`/v1/query`, `/v1/streaming_query`, an interrupt answered 404).
- `engine`: the local engine in front of the scripted Chat Completions upstream
  (`--no-responses`), with a working MCP server (`calc`), a failing one (`faulty`) and
  an unreachable one (`gone`), and a `text/plain` streaming query.
- with `group`: `forward` is a group of two workers (`service.workers: 2`), scraped
  through the first one's port: its series carry both workers' (issue 43).
- `degraded`: started without its upstream (`llama_stack.allow_degraded_mode`, a port
  nothing listens on): its calls upstream are refused connections, retried once.

    stack = MetricsStack(start_gateway, upstream, chat_upstream, postgres, mcp, faulty)
    with stack.running():        # a thread runs `round()` until the block ends
        ...                      # Prometheus scrapes stack.targets()
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.support.gateway_proc import Gateway, Upstream
from tests.support.postgres import PostgresServer
from tests.support.processes import free_port

KEYS = {"alice": "metrics-key-alice-0001", "bob": "metrics-key-bob-0001"}
# Reserving 1 + this many tokens is more than the daily limiter ever holds: a 429.
TOO_MANY_TOKENS = 5_000_000
LIMITERS = [
    {"name": "daily", "type": "user_limiter", "initial_quota": 1_000_000, "quota_increase": 1_000_000,
     "period": "1 day"},
    {"name": "cluster", "type": "cluster_limiter", "initial_quota": 100_000_000, "quota_increase": 0,
     "period": "1 day"},
]


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def _authentication() -> dict[str, Any]:
    return {"module": "api-key-token", "skip_for_metrics": True, "api_key_config": {
        "keys": [{"key": key, "user_id": user} for user, key in KEYS.items()]}}


class MetricsStack:
    """Three gateways on PostgreSQL (see the module docstring). `start_gateway(upstream_url,
    **config overrides) -> Gateway`: the tests' gateway_factory, or the picture script's own."""

    def __init__(self, start_gateway: Callable[..., Gateway], upstream: Upstream, chat_upstream: Upstream,
                 postgres: PostgresServer, mcp: Any, faulty: Any, group: Path | None = None):
        forward: dict[str, Any] = dict(
            authentication=_authentication(),
            database={"postgres": postgres.new_database(namespace="metrics-forward")},
            llama_stack={"circuit_breaker_failures": 5},   # its state is a panel (off in the tests' default)
            quota_handlers={"postgres": postgres.new_database(namespace="metrics-quota"), "limiters": LIMITERS})
        # `group`: `forward` is two workers of one group (`service.workers: 2`, as the
        # supervisor starts them) on one database, the rounds taking turns between them;
        # its target is the first's port, which answers for both (observability/group.py).
        self.forward_workers = [
            start_gateway(upstream.url, {"PROMETHEUS_MULTIPROC_DIR": str(group), "GATEWAY_WORKER_ID": str(index)},
                          **forward) for index in range(2)] if group is not None else []
        self.forward = self.forward_workers[0] if group is not None else start_gateway(upstream.url, **forward)
        self.engine = start_gateway(
            chat_upstream.url, authentication=_authentication(),
            database={"postgres": postgres.new_database(namespace="metrics-engine")},
            llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"},
            mcp_servers=[{"name": "calc", "url": mcp.url}, {"name": "faulty", "url": faulty.url, "timeout": 5},
                         {"name": "gone", "url": "http://127.0.0.1:9/mcp", "timeout": 2}])
        dead = f"http://127.0.0.1:{free_port()}"
        self.degraded = start_gateway(
            dead, authentication=_authentication(),
            database={"postgres": postgres.new_database(namespace="metrics-degraded")},
            llama_stack={"url": dead, "max_retries": 1, "retry_delay": 0.01, "allow_degraded_mode": True})
        self.rounds = 0
        self.errors: list[str] = []

    def targets(self) -> list[str]:
        """host:port of each gateway's own listener (not the tests' recording relay)."""
        return [f"127.0.0.1:{gateway.direct_port}" for gateway in (self.forward, self.engine, self.degraded)]

    def round(self) -> None:
        """One pass over every kind of request; what answered otherwise than expected is
        kept in `errors` (a workload that silently stopped working would draw nothing)."""
        forward, engine = self.forward, self.engine
        if self.forward_workers:
            forward = self.forward_workers[self.rounds % len(self.forward_workers)]
        alice, bob = bearer("alice"), bearer("bob")
        # Forward: JSON, a stream continuing it, reads, a background run.
        first = self._call(200, forward, "POST", "/v1/responses", {"input": "hello", "tool_choice": "none"}, alice)
        if first is not None:
            self._call(200, forward, "POST", "/v1/responses",
                       {"input": "more", "stream": True, "conversation": first["conversation"]}, alice)
            self._call(200, forward, "GET", f"/v1/responses/{first['id']}", None, alice)
        self._call(200, forward, "GET", "/v1/models", None, bob)
        self._call(200, forward, "POST", "/v1/responses", {"input": "later", "background": True, "store": True}, bob)
        # LCORE's query API: a query, a streaming query, an interrupt of a stream that is not running.
        self._call(200, forward, "POST", "/v1/query", {"query": "hello", "no_tools": True}, alice)
        self._call(200, forward, "POST", "/v1/streaming_query", {"query": "hello", "no_tools": True}, bob)
        self._call(404, forward, "POST", "/v1/streaming_query/interrupt", {"request_id": str(uuid.uuid4())}, bob)
        # Refused: no credential, a wrong key, a quota too small, invalid input.
        self._call(401, forward, "POST", "/v1/responses", {"input": "who am I"}, {})
        self._call(401, forward, "GET", "/v1/models", None, {"Authorization": "Bearer not-a-key"})
        self._call(429, forward, "POST", "/v1/responses", {"input": "big", "max_output_tokens": TOO_MANY_TOKENS}, bob)
        self._call(422, forward, "POST", "/v1/responses", {"input": 42}, alice)
        # The upstream fails.
        self._call(500, forward, "POST", "/v1/responses", {"input": "fail-upstream"}, alice)
        # Engine: a tool that works, one that fails, a server that is gone, a stream.
        self._call(200, engine, "POST", "/v1/responses",
                   {"input": "Use the add tool with 2 and 3", "tools": [{"type": "mcp", "server_label": "calc"}]}, alice)
        self._call(200, engine, "POST", "/v1/responses", {"input": "Use the explode tool", "stream": True,
                                                          "tools": [{"type": "mcp", "server_label": "faulty"}]}, bob)
        self._call(200, engine, "POST", "/v1/responses",
                   {"input": "Use a tool please", "tools": [{"type": "mcp", "server_label": "gone"}]}, alice)
        self._call(200, engine, "POST", "/v1/streaming_query",
                   {"query": "hello", "no_tools": True, "media_type": "text/plain"}, bob)
        self._call(401, engine, "GET", "/v1/models", None, {"Authorization": "Bearer wrong"})
        # The engine ends a failed model round as a `failed` response.
        self._call(200, engine, "POST", "/v1/responses", {"input": "fail-upstream"}, bob)
        # No upstream: 503 after a retry.
        self._call(503, self.degraded, "GET", "/v1/models", None, alice)
        self.rounds += 1

    def _call(self, status: int, gateway: Gateway, method: str, path: str, body: Any,
              headers: dict[str, str]) -> Any:
        """The JSON body of a 200 that was expected (None for a stream or another status)."""
        reply = gateway.request(method, path, body, headers=headers)
        # 5xx: whichever the gateway maps the upstream's failure to.
        if reply.status != status and not (status == 500 and reply.status >= 500):
            name = next(name for name, one in (("forward", self.forward), ("engine", self.engine),
                                               ("degraded", self.degraded),
                                               *(("forward worker", w) for w in self.forward_workers))
                        if one is gateway)
            self.errors.append(f"{name} {method} {path} {body}: expected {status}, got {reply.status}: "
                               f"{reply.body[:200]!r}")
            return None
        streamed = path == "/v1/streaming_query" or (isinstance(body, dict) and body.get("stream"))
        return reply.json() if status == 200 and not streamed else None

    @contextlib.contextmanager
    def running(self, pause: float = 0.2) -> Iterator[MetricsStack]:
        """`round()` again and again in a thread until the block ends."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    self.round()
                except Exception as error:  # noqa: BLE001 - reported by the test, not lost in a thread
                    self.errors.append(repr(error))
                stop.wait(pause)

        thread = threading.Thread(target=loop, name="metrics-workload", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(60)
