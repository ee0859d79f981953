"""The upstream's circuit breaker (issue 42), through `gateway serve`: a small relay in
front of the scripted upstream answers 503 while "down" and counts what reaches it.
After `circuit_breaker_failures` failing turns the circuit opens: a turn is refused with
LCORE's 503 in under 100 ms without reaching the upstream, `/readiness` and `/metrics`
say so, a log line too; after the cooldown one turn probes, and its answer closes it."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.processes import free_port

TURN = {"input": "hello", "tool_choice": "none"}


class Switch:
    """A relay to the scripted upstream that answers 503 while `down`."""

    def __init__(self, target: str):
        self.target = target
        self.down = False
        self.hits = 0
        switch = self

        class Handler(BaseHTTPRequestHandler):
            def _relay(self) -> None:
                switch.hits += 1
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if switch.down:
                    self._answer(503, b'{"detail": "upstream overloaded"}')
                    return
                request = urllib.request.Request(switch.target + self.path, data=body or None, method=self.command,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=30) as reply:
                        self._answer(reply.status, reply.read())
                except urllib.error.HTTPError as exc:
                    self._answer(exc.code, exc.read())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def switch(upstream):
    relay = Switch(upstream.url)
    yield relay
    relay.close()


def circuit_state(gateway) -> float:
    text = gateway.get("/metrics").body.decode()
    line = next(line for line in text.splitlines() if line.startswith("gateway_upstream_circuit_state{"))
    return float(line.rsplit(" ", 1)[1])


def test_the_circuit_opens_refuses_at_once_and_a_probe_closes_it(gateway_factory, switch):
    gateway = gateway_factory(switch.url, llama_stack={"circuit_breaker_failures": 2,
                                                       "circuit_breaker_cooldown_seconds": 2,
                                                       "api": "responses", "conversations": "gateway"})
    assert gateway.post("/v1/responses", TURN).status == 200
    assert circuit_state(gateway) == 0
    switch.down = True
    for _ in range(2):
        assert gateway.post("/v1/responses", TURN).status == 500   # the upstream's 503, relayed as LCORE does
    hits = switch.hits
    started = time.perf_counter()
    refused = gateway.post("/v1/responses", TURN)
    elapsed = time.perf_counter() - started
    assert refused.status == 503, refused.body
    assert refused.json()["detail"] == {"response": "Unable to connect to Llama Stack", "cause": "Connection error."}
    assert elapsed < 0.1, elapsed
    assert switch.hits == hits   # the upstream was not touched
    ready = gateway.get("/readiness")
    assert ready.status == 503 and "circuit breaker open" in ready.json()["reason"]
    assert switch.hits == hits
    assert circuit_state(gateway) == 2
    # Back up: after the cooldown one turn probes, and closes the circuit.
    switch.down = False
    time.sleep(2.1)
    assert gateway.post("/v1/responses", TURN).status == 200
    assert circuit_state(gateway) == 0
    assert gateway.get("/readiness").status == 200
    log = gateway.messages()
    assert "circuit closed -> open" in log and "circuit half_open -> closed" in log
