"""A TCP relay in front of a gateway that keeps every byte the gateway sent to clients.

The end-to-end suites reach each gateway through one of these, so a test at the end of
the session can scan everything any response carried (headers, JSON bodies, SSE frames)
for the secrets the gateway was configured with, whatever client library a test used.
A client that closes or resets its connection makes the relay close its side to the
gateway at once, so disconnect tests see what they would without it.

    python -m tests.support.recording_proxy --listen PORT --target PORT --record FILE
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys

_CHUNK = 64 * 1024


class Relay:
    def __init__(self, target_port: int, record_path: str):
        self._target = target_port
        self._record = open(record_path, "ab", buffering=0)  # noqa: SIM115 - open for the relay's life

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
                writer.write(data)
                await writer.drain()


async def serve(listen_port: int, target_port: int, record_path: str) -> None:
    relay = Relay(target_port, record_path)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", listen_port)
    print(f"relaying 127.0.0.1:{listen_port} -> 127.0.0.1:{target_port}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--record", required=True)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, args.target, args.record))


if __name__ == "__main__":
    sys.exit(main())
