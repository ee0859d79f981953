"""A TCP relay in front of a gateway that keeps every byte the gateway sent to clients,
and the credentials clients sent it.

The end-to-end suites reach each gateway through one of these, so a test at the end of
the session can scan everything any response carried (headers, JSON bodies, SSE frames)
for the secrets the gateway was configured with, whatever client library a test used,
and the gateway's log for those and for the clients' credentials (`--credentials`: the
values of their Authorization, identity and MCP-HEADERS headers, one a line).
A client that closes or resets its connection makes the relay close its side to the
gateway at once, so disconnect tests see what they would without it.

    python -m tests.support.recording_proxy --listen PORT --target PORT --record FILE [--credentials FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import sys

_CHUNK = 64 * 1024
# Request headers whose values are credentials (a head split across two reads is missed:
# heads are small and read whole in practice).
_CREDENTIAL = re.compile(rb"(?im)^(authorization|x-rh-identity|x-api-key|mcp-headers|x-auth-token)[ \t]*:[ \t]*([^\r\n]+)")


def credentials_in(data: bytes) -> set[str]:
    """A head's credential values: each whole, a bearer's token alone, and every string
    inside MCP-HEADERS' JSON (the clients' MCP servers' own credentials)."""
    found: set[str] = set()
    for name, raw in _CREDENTIAL.findall(data):
        value = raw.decode("latin-1").strip()
        found.add(value)
        if " " in value:
            found.add(value.split(" ", 1)[1].strip())
        if name.lower() == b"mcp-headers":
            with contextlib.suppress(ValueError):
                found |= _strings(json.loads(value))
    return found


def _strings(value) -> set[str]:
    if isinstance(value, str):
        return {value, value.split(" ", 1)[-1]}
    if isinstance(value, dict):
        return set().union(*(_strings(item) for item in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_strings(item) for item in value)) if value else set()
    return set()


class Relay:
    def __init__(self, target_port: int, record_path: str, credentials_path: str | None = None):
        self._target = target_port
        self._record = open(record_path, "ab", buffering=0)  # noqa: SIM115 - open for the relay's life
        self._credentials = open(credentials_path, "a", buffering=1) if credentials_path else None  # noqa: SIM115
        self._seen: set[str] = set()

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            gateway_reader, gateway_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            client_writer.close()
            return
        for writer in (client_writer, gateway_writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upward = asyncio.ensure_future(self._pump(client_reader, gateway_writer, record=False))
        downward = asyncio.ensure_future(self._pump(gateway_reader, client_writer, record=True))
        # Whichever side ends first ends both: a client that goes away must look to the
        # gateway like a client that went away.
        await asyncio.wait([upward, downward], return_when=asyncio.FIRST_COMPLETED)
        for task in (upward, downward):
            task.cancel()
        for writer in (gateway_writer, client_writer):
            writer.close()
        for task in (upward, downward):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: bool) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    return
                if record:
                    self._record.write(data)
                elif self._credentials is not None:
                    for value in credentials_in(data) - self._seen:
                        self._seen.add(value)
                        self._credentials.write(value.replace("\n", " ") + "\n")
                writer.write(data)
                await writer.drain()


async def serve(listen_port: int, target_port: int, record_path: str, credentials_path: str | None = None) -> None:
    relay = Relay(target_port, record_path, credentials_path)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", listen_port)
    print(f"relaying 127.0.0.1:{listen_port} -> 127.0.0.1:{target_port}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--credentials", help="where to append the credentials clients sent")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, args.target, args.record, args.credentials))


if __name__ == "__main__":
    sys.exit(main())
