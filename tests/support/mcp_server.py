"""A real MCP server for end-to-end tests (mcp 2.x ``MCPServer``, streamable HTTP at /mcp).

Run it as ``python -m tests.support.mcp_server --port N``; it prints exactly one line,
``mcp server listening on http://127.0.0.1:N/mcp``, once it accepts connections.

Tools:
  * ``add(a: int, b: int) -> int``  "Add two integers."
  * ``echo(text: str) -> str``      "Echo text back."

With ``--faulty`` the endpoint is ``/faulty/mcp`` (the scripted upstream simulates the
same tools for any MCP ``server_url`` containing ``faulty``) and three tools that fail
are listed after those two, one per way an MCP call can fail:
  * ``explode(text: str) -> str``  raises ``ToolError``: the call answers
    ``CallToolResult(isError=True, content=[TextContent("Error executing tool explode:
    explode refused: <text>")])``, a tool execution error;
  * ``reject(text: str) -> str``   raises ``MCPError(-32602, "reject refused: <text>")``:
    the call answers a JSON-RPC error, a protocol error;
  * ``vanish(text: str) -> str``   the server process exits while answering: the MCP
    server becomes unreachable in the middle of the call.

With ``--slow`` four more tools are listed after those, for the engine's loop rules:
  * ``meet_a(text: str)`` / ``meet_b(text: str)``: each waits (up to 3 s) until the
    other was called too, then answers ``met`` (``alone`` if the other never came): two
    calls of one round that run at the same time both answer ``met``;
  * ``sleep(seconds: float) -> str``: answers after that long (timeouts, cancellation).
  * ``repeat(text: str, times: int) -> str``: ``text`` that many times (the engine's cap
    on tool output).
  * ``shout(text: str, times: int) -> str``: fails (``ToolError``) with ``text`` that many
    times (the same cap on an error's output).

With ``--flood`` the server lists, after ``add`` and ``echo``, ``FLOOD_TOOLS`` tools of
about ``FLOOD_TOOL_BYTES`` bytes each (``flood_00000``...: a long description), a 22 MB
listing answered as one JSON body: a client's server that tries to flood the gateway.

With ``--sse`` the server speaks the SSE transport at ``/sse`` instead of streamable HTTP.

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
import os
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

RECORD_PATH = "/_mcp/requests"
MCP_PATH = "/mcp"
FAULTY_PATH = "/faulty/mcp"
SSE_PATH = "/sse"
MAX_BODY = 4096
# `client_tools` for gateways whose tests name their own MCP servers on loopback (or at
# the unresolvable `unreachable.invalid`): allowed, as an operator would allow-list them.
CLIENT_MCP_ON_LOOPBACK = {"allow_unconfigured_mcp_servers": True,
                          "allowed_mcp_destinations": ["127.0.0.0/8", "::1", "unreachable.invalid"]}


FLOOD_TOOLS = 20_000
FLOOD_TOOL_BYTES = 1_100


def build_mcp_server(faulty: bool = False, slow: bool = False, flood: bool = False):
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

    if faulty:
        add_faulty_tools(server)
    if slow:
        add_slow_tools(server)
    if flood:
        add_flood_tools(server)
    return server


def add_flood_tools(server) -> None:
    """Listed, never registered: the listing is the flood (building 20,000 registered
    tools would take the server a minute)."""
    from mcp.types import Tool

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    flood = [Tool(name=f"flood_{n:05d}", description=f"Flood tool {n}. " + "x" * (FLOOD_TOOL_BYTES - 120),
                  input_schema=schema) for n in range(FLOOD_TOOLS)]
    registered = server.list_tools

    async def list_tools():
        return [*await registered(), *flood]

    server.list_tools = list_tools


def add_slow_tools(server) -> None:
    arrived: set[str] = set()
    both = asyncio.Event()

    async def meet(name: str) -> str:
        arrived.add(name)
        if len(arrived) == 2:
            both.set()
        try:
            await asyncio.wait_for(both.wait(), 3)
            return "met"
        except TimeoutError:
            return "alone"
        finally:
            arrived.discard(name)
            if not arrived:
                both.clear()

    @server.tool(description="Waits for meet_b.")
    async def meet_a(text: str) -> str:
        return await meet("a")

    @server.tool(description="Waits for meet_a.")
    async def meet_b(text: str) -> str:
        return await meet("b")

    @server.tool(description="Answers after the given number of seconds.")
    async def sleep(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="Repeats the text.")
    def repeat(text: str, times: int) -> str:
        return text * times

    @server.tool(description="Fails, repeating the text in its error.")
    def shout(text: str, times: int) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(text * times)


def add_faulty_tools(server) -> None:
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    @server.tool(description="Always fails: the tool raises an error.")
    def explode(text: str) -> str:
        raise ToolError(f"explode refused: {text}")

    @server.tool(description="Always fails: the server answers a JSON-RPC error.")
    def reject(text: str) -> str:
        raise MCPError(code=-32602, message=f"reject refused: {text}")  # -32602: invalid params

    @server.tool(description="The server exits while answering.")
    def vanish(text: str) -> str:
        # No response, no clean shutdown: the connection drops as if the host went away.
        os._exit(3)


class RecordingMiddleware:
    """ASGI middleware: records every HTTP request and serves /_mcp/requests itself."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.records: list[dict[str, Any]] = []
        # /_mcp/requests answers 503 until the ready line is printed, so a caller that
        # waits for it (start_mcp_server) always finds the line in the log.
        self.ready = False

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
        if not self.ready:
            status, payload = 503, {"error": "starting"}
        elif method == "GET":
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


def build_app(host: str = "127.0.0.1", faulty: bool = False, slow: bool = False,
              sse: bool = False, flood: bool = False) -> RecordingMiddleware:
    server = build_mcp_server(faulty, slow, flood)
    if sse:
        return RecordingMiddleware(server.sse_app(host=host))
    path = FAULTY_PATH if faulty else MCP_PATH
    # The flood answers JSON: the `mcp` client reads a JSON answer whole (its cap on one
    # SSE event, 1 MiB by default, does not apply), as a server that floods would.
    return RecordingMiddleware(server.streamable_http_app(streamable_http_path=path, host=host,
                                                          json_response=flood))


def _endpoint(faulty: bool, sse: bool) -> str:
    return SSE_PATH if sse else FAULTY_PATH if faulty else MCP_PATH


async def serve(host: str, port: int, faulty: bool = False, slow: bool = False, sse: bool = False,
                flood: bool = False) -> None:
    import uvicorn

    app = build_app(host, faulty, slow, sse, flood)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # re-raises the start-up error
            raise SystemExit(f"mcp server stopped before it started listening on {host}:{port}")
        await asyncio.sleep(0.01)
    print(f"mcp server listening on http://{host}:{port}{_endpoint(faulty, sse)}", flush=True)
    app.ready = True
    await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18001)
    parser.add_argument("--faulty", action="store_true",
                        help=f"also list the failing tools, at {FAULTY_PATH}")
    parser.add_argument("--slow", action="store_true", help="also list meet_a, meet_b, sleep and repeat")
    parser.add_argument("--sse", action="store_true", help=f"the SSE transport, at {SSE_PATH}")
    parser.add_argument("--flood", action="store_true", help=f"also list {FLOOD_TOOLS} long tools (22 MB)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.host, args.port, args.faulty, args.slow, args.sse, args.flood))
    except KeyboardInterrupt:
        pass


# ---------------------------------------------------------------------------------------
# Helpers for tests (run in the test process, not in the server).


def start_mcp_server(log_dir: Path, port: int | None = None, timeout: float = 30.0,
                     faulty: bool = False, slow: bool = False, sse: bool = False, flood: bool = False):
    """Spawn the MCP server and wait until it answers; ``.url`` is ``http://127.0.0.1:N/mcp``
    (``…/faulty/mcp`` with ``faulty``: the failing tools too, see the module docstring).

    ``proc.extra["base_url"]`` is ``http://127.0.0.1:N`` (for the /_mcp/requests endpoint).
    """
    from tests.support.processes import free_port, python_module, spawn, wait_http

    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    flags = [flag for flag, on in (("--faulty", faulty), ("--slow", slow), ("--sse", sse), ("--flood", flood)) if on]
    proc = spawn("mcp-server" + "".join(flag[1:] for flag in flags),
                 python_module("tests.support.mcp_server", "--port", str(port), *flags), log_dir)
    wait_http(proc, base + RECORD_PATH, timeout=timeout, ok=lambda status: status == 200)
    proc.url = base + _endpoint(faulty, sse)
    proc.extra["base_url"] = base
    return proc


def running_mcp_server(tmp_path_factory: Any, name: str, **flags: bool):
    """For a pytest fixture: `yield from running_mcp_server(tmp_path_factory, "name", sse=True)`
    yields the started server and stops it afterwards."""
    proc = start_mcp_server(tmp_path_factory.mktemp(name), **flags)
    try:
        yield proc
    finally:
        proc.stop()


def _records_url(server: Any) -> str:
    """Accept a Proc from start_mcp_server, its MCP url or its base url."""
    parts = urllib.parse.urlsplit(getattr(server, "url", server))
    return f"{parts.scheme}://{parts.netloc}{RECORD_PATH}"


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
