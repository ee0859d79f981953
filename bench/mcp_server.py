"""`python -m bench.mcp_server --port N`: the MCP server of the engine scenario's MCP
round trip. The test suite's tools (`tests/support/mcp_server.py`: `add` answers at
once, zero latency) on the `mcp` package's server (FastMCP, now `MCPServer`),
streamable HTTP at /mcp, without the suite's request recording (it would grow and cost
CPU on the load core for the whole run).
"""

from __future__ import annotations

import argparse

import uvicorn

from tests.support.mcp_server import MCP_PATH, build_mcp_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = build_mcp_server().streamable_http_app(streamable_http_path=MCP_PATH, host=args.host)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
