"""`gateway demo`: the gateway with embedded SQLite in front of the bundled scripted
upstream, both in one process, so a fresh machine can try it with one command."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from typing import AsyncIterator

from aiohttp import web

from gateway.app import create_app
from gateway.config import parse_config


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def demo_app(port: int, data_dir: str | None, engine: bool = False) -> tuple[web.Application, str, Path]:
    """The demo app, its banner and the folder of its SQLite file; `engine`: the scripted upstream serves only Chat
    Completions and the gateway runs the Responses API itself (the local engine)."""
    upstream_port = _free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}"
    workdir = Path(data_dir or tempfile.mkdtemp(prefix="gateway-demo-"))
    config = parse_config({
        "name": "gateway demo",
        "service": {"host": "127.0.0.1", "port": port},
        "llama_stack": {"url": upstream_url, "api": "chat_completions" if engine else "auto"},
        "database": {"sqlite": {"db_path": str(workdir / "gateway.db")}},
    })
    app = create_app(config)

    async def scripted_upstream(app: web.Application) -> AsyncIterator[None]:
        from gateway.devserver import create_app as create_upstream

        runner = web.AppRunner(create_upstream(record=False, responses=not engine), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", upstream_port).start()
        yield
        await runner.cleanup()

    # Started before the gateway's own services, stopped after them.
    app.cleanup_ctx.insert(0, scripted_upstream)
    base = f"http://127.0.0.1:{port}"
    banner = f"""
Gateway demo on {base} (scripted upstream on {upstream_url}; SQLite in {workdir})
Mode: {"local engine over the upstream's Chat Completions" if engine else "forwarding to the upstream's Responses API"}
Try it:
  curl -s {base}/v1/responses -H 'Content-Type: application/json' -d '{{"input": "Hello gateway"}}'
  curl -sN {base}/v1/responses -H 'Content-Type: application/json' -d '{{"input": "Hello again", "stream": true}}'
  curl -s {base}/v1/models
Press Ctrl+C to stop.
"""
    return app, banner, workdir
