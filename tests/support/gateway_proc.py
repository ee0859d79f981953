"""Run `gateway serve` and the scripted upstream as real processes, and talk to them.

End-to-end tests go through the real entry point over loopback sockets: the console
script `gateway serve -c FILE`, a config file on disk, the scripted upstream
(`python -m gateway.devserver`) as a separate process.
"""

from __future__ import annotations

import http.client
import json
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from tests.support.processes import Proc, free_port, python_module, spawn, wait_http

GATEWAY_BIN = Path(sys.executable).parent / "gateway"
# Every gateway this session started (their logs are scanned for secrets at its end:
# tests/conftest.py).
STARTED: list["Gateway"] = []
# Shorter values are words, not secrets (a scan for them would find them anywhere).
MIN_SECRET = 6


@dataclass
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def ok(self) -> Any:
        """The JSON body of a 200 reply; anything else fails the test with the body."""
        assert self.status == 200, (self.status, self.body[:2000])
        return self.json()


class Endpoint:
    """A process listening on 127.0.0.1:port with small sync HTTP helpers."""

    def __init__(self, proc: Proc, port: int):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                raw: bytes | None = None, timeout: float = 30) -> HttpReply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            all_headers = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=data, headers=all_headers)
            resp = conn.getresponse()
            return HttpReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def get(self, path: str, **kwargs: Any) -> HttpReply:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> HttpReply:
        return self.request("POST", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> HttpReply:
        return self.request("DELETE", path, **kwargs)

    def stop(self) -> None:
        self.proc.stop()


class Upstream(Endpoint):
    """The scripted upstream, with access to what it received."""

    def requests(self, path: str | None = None) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/_scripted/requests", timeout=10) as resp:
            recorded = json.loads(resp.read())
        return [r for r in recorded if path is None or r["path"] == path]

    def clear(self) -> None:
        self.request("DELETE", "/_scripted/requests")

    def last(self, path: str = "/v1/responses", method: str = "POST") -> dict[str, Any]:
        matching = [r for r in self.requests(path) if r["method"] == method]
        assert matching, f"the upstream received no {method} {path}"
        return matching[-1]

    def open_streams(self) -> int:
        """SSE streams the upstream is serving right now (GET /_scripted/open)."""
        return int(self.get("/_scripted/open").json()["open_streams"])


def start_upstream(log_dir: Path, *flags: str) -> Upstream:
    port = free_port()
    proc = spawn(f"upstream-{port}", python_module("gateway.devserver", "--port", str(port), *flags), log_dir)
    wait_http(proc, f"http://127.0.0.1:{port}/health")
    return Upstream(proc, port)


class Gateway(Endpoint):
    """`gateway serve`, reached through a recording relay (`recording_proxy.py`): every
    byte it sends to clients is kept, so the session can scan it for secrets. Raw-socket
    tests that depend on kernel buffering talk to `direct_port` instead."""

    config_path: Path
    direct_port: int
    relay: Proc | None = None
    recording: Path | None = None
    credentials: Path | None = None
    kept = False   # held by a session fixture: not stopped at the end of the module that started it

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.stop()
        self.proc.stop()

    def secrets(self) -> set[str]:
        """Credentials in the gateway's configuration: the upstream API key, the
        api-key-token keys, every value of an MCP header read from a file (and its bare
        token), the gateway's own Kubernetes service-account token (`k8s_token_path`),
        the PostgreSQL passwords (`database`, `quota_handlers`), the vector stores'
        `search_api_key`s, the web search and moderation endpoints' keys, and the compaction
        keys' secrets."""
        config = yaml.safe_load(self.config_path.read_text())
        found = {config.get("llama_stack", {}).get("api_key") or ""}
        authentication = config.get("authentication") or {}
        api_keys = authentication.get("api_key_config") or {}
        found.add(api_keys.get("api_key") or "")
        for entry in api_keys.get("keys") or []:
            found.add(entry.get("key") or (Path(entry["key_file"]).read_text().strip() if "key_file" in entry else ""))
        found.add(((config.get("database") or {}).get("postgres") or {}).get("password") or "")
        found.add((config.get("web_search") or {}).get("api_key") or "")
        found.add((config.get("guardrails") or {}).get("api_key") or "")
        found.add(((config.get("quota_handlers") or {}).get("postgres") or {}).get("password") or "")
        found |= {key.get("secret") or "" for key in (config.get("response_compaction") or {}).get("keys") or []}
        token_path = authentication.get("k8s_token_path")
        if token_path and Path(token_path).is_file():
            found.add(Path(token_path).read_text().strip())
        found |= {store.get("search_api_key") or "" for store in config.get("byok_rag") or []}
        for server in config.get("mcp_servers") or []:
            for source in (server.get("authorization_headers") or {}).values():
                path = Path(source)
                if path.is_absolute() and path.is_file():
                    value = path.read_text().strip()
                    found |= {value, value.split(" ", 1)[-1]}
        return {secret for secret in found if len(secret) >= 6}

    def leaked_secrets(self) -> set[str]:
        """The configured secrets found in anything the gateway sent to a client."""
        if self.recording is None or not self.recording.exists():
            return set()
        sent = self.recording.read_bytes()
        return {secret for secret in self.secrets() if secret.encode() in sent}

    def logged_secrets(self) -> set[str]:
        """The configured secrets, and the credentials clients sent (Authorization and
        identity headers, MCP-HEADERS' values), found anywhere in the gateway's log."""
        found = self.secrets()
        if self.credentials is not None and self.credentials.exists():
            found |= {line for line in self.credentials.read_text().splitlines() if len(line) >= MIN_SECRET}
        log = self.log()
        return {secret for secret in found if secret in log}

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def client(self, **kwargs: Any):
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=kwargs.pop("api_key", "test-token"), max_retries=0,
                      **kwargs)

    def log(self) -> str:
        """The whole log (`Proc.log()` is its tail, for failure messages): with the access
        line on, start-up lines would otherwise scroll out of reach."""
        try:
            return self.proc.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def messages(self) -> str:
        """The log as plain lines (`LEVEL logger: message`): with `access_log_format:
        json` (the tests' default) every line is a JSON object, its message escaped."""
        lines = []
        for line in self.log().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                lines.append(line)
                continue
            if isinstance(record, dict) and record.get("type") == "log":
                lines.append(f"{record.get('level')} {record.get('logger')}: {record.get('message')}")
            else:
                lines.append(line)
        return "\n".join(lines)

    def stream(self, body: dict[str, Any], path: str = "/v1/responses",
               headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, list[tuple[str, Any]]]:
        """POST a streaming request; return the status and the (event, data) frames in order."""
        reply = self.post(path, {**body, "stream": True}, headers=headers, timeout=timeout)
        return reply.status, parse_sse(reply.body)


def parse_sse(body: bytes) -> list[tuple[str, Any]]:
    frames = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        event = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        payload = "\n".join(data)
        frames.append((event, payload if payload == "[DONE]" else json.loads(payload)))
    return frames


def gateway_config(upstream_url: str, db_path: Path, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "gateway under test",
        # The access line on, as JSON: every e2e gateway's log is scanned for secrets at
        # the session's end (tests/conftest.py), its access lines included.
        # A short drain: a test that stops a gateway with a stream still running waits
        # at most this (tests/e2e/test_drain.py sets its own).
        "service": {"host": "127.0.0.1", "port": 8080, "access_log": True, "access_log_format": "json",
                    "shutdown_grace_seconds": 2},
        # The circuit breaker off: a test of upstream failures would open it for the
        # tests after it (tests/e2e/test_circuit_breaker.py turns it on).
        "llama_stack": {"url": upstream_url, "max_retries": 0, "timeout": 30, "circuit_breaker_failures": 0},
        "authentication": {"module": "noop"},
        "database": {"sqlite": {"db_path": str(db_path)}},
        # Off unless a test turns them on (tests/e2e/test_topic_summaries.py): a new
        # conversation's summary is an extra upstream call beside the turn's, which
        # tests that read what the upstream received would see, and the trigger words
        # in a turn's text would fire in it too.
        "customization": {"topic_summaries": False},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict) and key != "database":  # one engine
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


def start_gateway(workdir: Path, config: dict[str, Any], env: dict[str, str] | None = None) -> Gateway:
    """Write the config, run `gateway serve -c FILE` on a free port and put a recording
    relay in front of it."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = {**config, "service": {**config.get("service", {}), "port": port}}
    config_path = workdir / "lightspeed-stack.yaml"
    config_path.write_text(yaml.safe_dump(config))
    argv = [str(GATEWAY_BIN if GATEWAY_BIN.exists() else shutil.which("gateway")), "serve", "-c", str(config_path)]
    proc = spawn(f"gateway-{port}", argv, workdir, env={"GATEWAY_LOG_LEVEL": "INFO", **(env or {})})
    wait_http(proc, f"http://127.0.0.1:{port}/liveness")
    relay_port = free_port()
    recording, credentials = workdir / "sent-to-clients.bin", workdir / "client-credentials.txt"
    relay = spawn(f"relay-{relay_port}", python_module("tests.support.recording_proxy", "--listen", str(relay_port),
                                                       "--target", str(port), "--record", str(recording),
                                                       "--credentials", str(credentials)), workdir)
    wait_http(relay, f"http://127.0.0.1:{relay_port}/liveness")
    gateway = Gateway(proc, relay_port)
    gateway.config_path, gateway.direct_port = config_path, port
    gateway.relay, gateway.recording, gateway.credentials = relay, recording, credentials
    STARTED.append(gateway)
    return gateway


def events_of(frames: list[tuple[str, Any]]) -> Iterator[dict[str, Any]]:
    return (data for _, data in frames if data != "[DONE]")


def serving(gateway) -> dict[int, int]:
    """worker index -> pid, as the supervisor last logged them serving."""
    found: dict[int, int] = {}
    for line in gateway.messages().splitlines():
        if "gateway.workers:" in line and ") is serving" in line:
            words = line.split("gateway.workers: worker ", 1)[1].split()
            found[int(words[0])] = int(words[2].rstrip(")"))
    return found
