"""Shared fixtures: real processes on loopback (docs/architecture.md, decision 8:
every advertised feature has an end-to-end test)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support import postgres as pg
from tests.support.auth_peers import TestCa
from tests.support.gateway_proc import STARTED, Gateway, Upstream, gateway_config, start_gateway, start_upstream
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK

FIXTURES = Path(__file__).parent / "fixtures" / "llama-stack-0.7.3"


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_log() -> Iterator[None]:
    """At the session's end, every gateway it started (`gateway serve`, through
    tests/support/gateway_proc.py) is checked: no configured secret and no credential a
    client sent it (API keys, bearer tokens, identity headers, MCP credentials) is in its
    log, access lines included. Torn down last: the logs are complete by then."""
    yield
    leaks = {str(gateway.config_path): sorted(f"{secret[:3]}…" for secret in gateway.logged_secrets())
             for gateway in STARTED}
    assert not any(leaks.values()), f"secrets in gateway logs: { {k: v for k, v in leaks.items() if v} }"


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """The scripted upstream in Llama Stack's dialect (Responses + Conversations APIs)."""
    server = start_upstream(tmp_path_factory.mktemp("upstream"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def upstream_with(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Upstream]]:
    """A scripted upstream started with flags (e.g. `--no-conversations`), one per set of flags."""
    started: dict[tuple[str, ...], Upstream] = {}

    def start(*flags: str) -> Upstream:
        if flags not in started:
            started[flags] = start_upstream(tmp_path_factory.mktemp("upstream"), *flags)
        return started[flags]

    yield start
    for server in started.values():
        server.stop()


@pytest.fixture(scope="session")
def chat_upstream(upstream_with: Callable[..., Upstream]) -> Upstream:
    """The scripted upstream without its Responses API: what engine mode runs over."""
    return upstream_with("--no-responses")


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pg.PostgresServer]:
    """A private PostgreSQL server for the session (see tests/support/postgres.py), plain
    and TLS (`postgres.tls`: the CA that signed its certificate). Without
    it installed the tests that need it skip, unless GATEWAY_REQUIRE_POSTGRES=1 (make test)."""
    if not pg.installed():
        reason = f"PostgreSQL is not set up: run {pg.SETUP_SCRIPT}"
        if os.environ.get(pg.REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("postgres")
    server = pg.start_postgres(directory, tls=TestCa(directory / "tls"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gateway_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Gateway]]:
    """Start `gateway serve` with a config built from overrides; all stopped at the end."""
    started: list[Gateway] = []

    def start(upstream_url: str, env: dict[str, str] | None = None, *, keep: bool = False,
              **overrides: Any) -> Gateway:
        """`keep`: a session fixture's gateway, which outlives the module that started it."""
        workdir = tmp_path_factory.mktemp("gateway")
        gateway = start_gateway(workdir, gateway_config(upstream_url, workdir / "gateway.db", **overrides), env)
        gateway.kept = keep
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.stop()
    # No response of any end-to-end test may carry a credential the gateway was given:
    # every byte sent to clients is scanned, error bodies and events relayed from the
    # upstream included (its `echo-error` triggers repeat the credentials it received:
    # tests/e2e/test_upstream_error_redaction.py).
    leaks = {str(gateway.config_path): sorted(f"{secret[:3]}…" for secret in gateway.leaked_secrets())
             for gateway in started}
    assert not any(leaks.values()), f"configured secrets sent to clients: { {k: v for k, v in leaks.items() if v} }"


@pytest.fixture(scope="module", autouse=True)
def module_gateways_stopped() -> Iterator[None]:
    """The gateways a module started stop when it ends, not when the session does: a
    full run starts hundreds (each a gateway and a recording relay, with their timers and
    database connections). Those a session fixture holds (`keep=True`) live on; the
    session's checks of their logs and of what they sent read files, after the stop."""
    first = len(STARTED)
    yield
    for started in STARTED[first:]:
        if not started.kept:
            started.stop()


@pytest.fixture(scope="session")
def gateway(gateway_factory: Callable[..., Gateway], upstream: Upstream) -> Gateway:
    """A gateway with default configuration in front of the scripted upstream, taking
    clients' own MCP servers on loopback (the upstream simulates them)."""
    return gateway_factory(upstream.url, keep=True, client_tools=CLIENT_MCP_ON_LOOPBACK)
