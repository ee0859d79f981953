"""A relay in front of the scripted upstream that injects HTTP faults (issue 42): while
`down` it answers every request 503; `faults` are answers (status, headers) given to the
next requests instead of relaying them, one each; everything else is relayed
(buffered: JSON only, not streams). It counts what reached it, per method and path."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.processes import free_port


class FaultRelay:
    def __init__(self, target: str):
        self.target = target
        self.down = False
        self.faults: list[tuple[int, dict[str, str]]] = []
        self.hits: Counter[str] = Counter()   # "METHOD /path" -> requests that reached the relay
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                relay.hits[f"{self.command} {self.path.split('?')[0]}"] += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if relay.down:
                    self._answer(503, b'{"detail": "upstream overloaded"}', {})
                    return
                if relay.faults:
                    status, headers = relay.faults.pop(0)
                    self._answer(status, b'{"detail": "injected fault"}', headers)
                    return
                request = urllib.request.Request(relay.target + self.path, data=body or None, method=self.command,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=30) as reply:
                        self._answer(reply.status, reply.read(), {})
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, exc.read(), {})

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
