"""Start-up memory: a gateway whose configuration uses no MCP server, no PostgreSQL and
no role rules never loads `mcp`, `asyncpg` or `jsonpath_ng` (nor, until the first compaction
(on by default, its key generated at start-up) and without the `jwk-token` module,
`cryptography` at all, nor PyJWT); with tracing off (no `OTEL_*` variables) nothing of OpenTelemetry
is loaded, neither its API nor its SDK and exporter, so no OpenTelemetry call is made on
any request; and nothing but
`/openapi.json` loads the `openai` package's types (together ~40 MiB of idle RSS). Each case runs in a fresh interpreter, builds the app as `gateway serve` and
`gateway demo` do, starts its services, serves a turn over loopback, then reports
which of those modules are loaded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

HEAVY = ("mcp", "asyncpg", "jsonpath_ng", "openai", "cryptography", "cryptography.hazmat.primitives.ciphers.aead",
         "jwt", "opentelemetry", "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")

_PRELUDE = textwrap.dedent("""
    import asyncio, json, socket, sys
    from aiohttp import ClientSession, web

    HEAVY = {heavy!r}

    def free_port():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    async def serve_a_turn(app, port):
        runner = web.AppRunner(app)
        await runner.setup()  # every service the configuration asks for
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with ClientSession() as http:
                async with http.post(f"http://127.0.0.1:{{port}}/v1/responses", json={{"input": "hi"}}) as reply:
                    assert reply.status == 200, await reply.text()
            loaded = sorted(name for name in HEAVY if name in sys.modules)
        finally:
            await runner.cleanup()
        return loaded
""").format(heavy=HEAVY)

DEMO = _PRELUDE + textwrap.dedent("""
    from gateway.demo import demo_app
    port = free_port()
    app, _, _ = demo_app(port, sys.argv[1], engine=sys.argv[2] == "engine")
    print(json.dumps(asyncio.run(serve_a_turn(app, port))))
""")

SERVE = _PRELUDE + textwrap.dedent("""
    from gateway.app import create_app
    from gateway.config import load_config
    from gateway.devserver import create_app as create_upstream

    async def main():
        upstream = web.AppRunner(create_upstream(record=False))
        await upstream.setup()
        await web.TCPSite(upstream, "127.0.0.1", int(sys.argv[2])).start()
        try:
            loaded = await serve_a_turn(create_app(load_config(sys.argv[1])), free_port())
        finally:
            await upstream.cleanup()
        # The control: the modules are there once a configuration or a turn needs them.
        from gateway.identity.roles import RoleRules
        from gateway.config.access import RoleRule
        RoleRules([RoleRule(jsonpath="$.sub", operator="equals", value=["x"], roles=["r"])])
        from gateway.engine.mcp import McpServer, list_tools
        from gateway.engine.mcp import McpFailure
        try:
            await list_tools(McpServer("x", "http://127.0.0.1:9/mcp", {}, 2))
        except McpFailure:
            pass
        from gateway.http.openapi import openapi_document
        openapi_document("gateway", "0", "")
        from gateway.compaction.seal import CompactionSeal
        from gateway.config.compaction import CompactionKey
        CompactionSeal([CompactionKey(id="k", secret="s" * 32)]).seal("u", "s")   # the first compaction
        from gateway.identity.build import authenticator_class
        authenticator_class("jwk-token")   # authentication.module: jwk-token
        from gateway.observability.observers import RequestObservers
        RequestObservers(load_config(sys.argv[1]),
                         {"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
        return loaded, sorted(name for name in HEAVY if name in sys.modules)

    print(json.dumps(asyncio.run(main())))
""")


def run(script: str, *args: str) -> object:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_the_demo_loads_none_of_them(tmp_path, mode):
    assert run(DEMO, str(tmp_path), mode) == []


def test_gateway_serve_with_a_noop_config_loads_none_of_them(tmp_path):
    from tests.support.processes import free_port

    port = free_port()
    config = tmp_path / "lightspeed-stack.yaml"
    config.write_text(yaml.safe_dump({
        "name": "noop", "service": {"host": "127.0.0.1", "port": 8080},
        "llama_stack": {"url": f"http://127.0.0.1:{port}", "use_as_library_client": False},
        "authentication": {"module": "noop"},
        "database": {"sqlite": {"db_path": str(tmp_path / "gateway.db")}},
    }))
    at_start, later = run(SERVE, str(config), str(port))
    assert at_start == []
    assert later == ["cryptography", "cryptography.hazmat.primitives.ciphers.aead", "jsonpath_ng", "jwt", "mcp",
                     "openai", "opentelemetry", "opentelemetry.exporter.otlp.proto.http",
                     "opentelemetry.sdk"]  # what the check would have seen
