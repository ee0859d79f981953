"""A real MCP server for end-to-end tests (mcp 2.x ``MCPServer``, streamable HTTP at /mcp).

Run it as ``python -m tests.support.mcp_server --port N``; it prints exactly one line,
``mcp server listening on http://127.0.0.1:N/mcp``, once it accepts connections.

Tools:
  * ``add(a: int, b: int) -> int``  "Add two integers."
  * ``echo(text: str) -> str``      "Echo text back."

Every HTTP request the server receives (except the inspection endpoint itself) is
recorded with its headers, so a test can prove that the gateway or Llama Stack forwarded
configured headers (Authorization, X-Api-Key, ...) to the MCP server:

  * ``GET /_mcp/requests``    -> JSON list of ``{"path", "method", "headers", "body"}``
    (header names lower-cased; ``body`` is the request body decoded as UTF-8, truncated
    to 4 KiB, e.g. the JSON-RPC message of a POST /mcp).
  * ``DELETE /_mcp/requests`` -> clears the list, answers ``{"cleared": N}``.

From a test, use :func:`start_mcp_server` (returns a ``Proc`` whose ``.url`` is the MCP
endpoint ``http://127.0.0.1:N/mcp``), then :func:`recorded_requests` and
:func:`clear_recorded_requests`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

RECORD_PATH = "/_mcp/requests"
MAX_BODY = 4096


def build_mcp_server():
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("gateway-test-mcp", log_level="WARNING")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(description="Echo text back.")
    def echo(text: str) -> str:
        """Echo text back."""
        return text

    return server


class RecordingMiddleware:
    """ASGI middleware: records every HTTP request and serves /_mcp/requests itself."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.records: list[dict[str, Any]] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == RECORD_PATH:
            await self._serve_records(scope, send)
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", []):
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        record: dict[str, Any] = {"path": scope["path"], "method": scope["method"],
                                  "headers": headers, "body": ""}
        self.records.append(record)
        body = bytearray()

        async def recording_receive():
            message = await receive()
            if message["type"] == "http.request" and len(body) < MAX_BODY:
                body.extend(message.get("body", b"")[: MAX_BODY - len(body)])
                record["body"] = body.decode("utf-8", errors="replace")
            return message

        await self.app(scope, recording_receive, send)

    async def _serve_records(self, scope, send) -> None:
        method = scope["method"]
        if method == "GET":
            status, payload = 200, list(self.records)
        elif method == "DELETE":
            status, payload = 200, {"cleared": len(self.records)}
            self.records.clear()
        else:
            status, payload = 405, {"error": f"method {method} not allowed"}
        data = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def build_app(host: str = "127.0.0.1") -> RecordingMiddleware:
    server = build_mcp_server()
    return RecordingMiddleware(server.streamable_http_app(streamable_http_path="/mcp", host=host))


async def serve(host: str, port: int) -> None:
    import uvicorn

    config = uvicorn.Config(build_app(host), host=host, port=port, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # re-raises the start-up error
            raise SystemExit(f"mcp server stopped before it started listening on {host}:{port}")
        await asyncio.sleep(0.01)
    print(f"mcp server listening on http://{host}:{port}/mcp", flush=True)
    await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18001)
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.host, args.port))
    except KeyboardInterrupt:
        pass


# ---------------------------------------------------------------------------------------
# Helpers for tests (run in the test process, not in the server).


def start_mcp_server(log_dir: Path, port: int | None = None, timeout: float = 30.0):
    """Spawn the MCP server and wait until it answers; ``.url`` is ``http://127.0.0.1:N/mcp``.

    ``proc.extra["base_url"]`` is ``http://127.0.0.1:N`` (for the /_mcp/requests endpoint).
    """
    from tests.support.processes import free_port, python_module, spawn, wait_http

    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    proc = spawn("mcp-server", python_module("tests.support.mcp_server", "--port", str(port)),
                 log_dir)
    wait_http(proc, base + RECORD_PATH, timeout=timeout, ok=lambda status: status == 200)
    proc.url = base + "/mcp"
    proc.extra["base_url"] = base
    return proc


def _records_url(server: Any) -> str:
    """Accept a Proc from start_mcp_server, its MCP url or its base url."""
    url = getattr(server, "url", server)
    url = url.rstrip("/")
    if url.endswith("/mcp"):
        url = url[: -len("/mcp")]
    return url + RECORD_PATH


def recorded_requests(server: Any) -> list[dict[str, Any]]:
    """The requests the MCP server has received so far (see module docstring)."""
    with urllib.request.urlopen(_records_url(server), timeout=5) as resp:
        return json.loads(resp.read())


def clear_recorded_requests(server: Any) -> None:
    req = urllib.request.Request(_records_url(server), method="DELETE")
    with urllib.request.urlopen(req, timeout=5) as resp:
        resp.read()


if __name__ == "__main__":
    sys.exit(main())
