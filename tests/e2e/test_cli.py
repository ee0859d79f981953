"""The `gateway` command: serve (config from -c or LIGHTSPEED_STACK_CONFIG_PATH),
check-config, and demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
import yaml

from gateway.allocator import TCACHE_COUNT
from tests.support.gateway_proc import GATEWAY_BIN, Gateway, gateway_config
from tests.support.processes import free_port, spawn, wait_http
from tests.support.raw_client import wait_until


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(GATEWAY_BIN), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def write(path, config) -> str:
    path.write_text(yaml.safe_dump(config) if isinstance(config, dict) else config)
    return str(path)


def test_check_config_ok_with_warnings(tmp_path, upstream):
    config = gateway_config(upstream.url, tmp_path / "db.sqlite")
    # Limiters without storage: accepted and not enforced, as in LCORE, with a warning.
    config["quota_handlers"] = {"limiters": [{"name": "daily", "type": "user_limiter", "initial_quota": 1,
                                              "quota_increase": 1, "period": "1 day"}]}
    result = run("check-config", "-c", write(tmp_path / "ok.yaml", config))
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout and "quota_handlers: limiters are configured without sqlite or postgres" \
        in result.stdout


def test_check_config_names_every_bad_key(tmp_path):
    bad = """
name: x
service: {port: not-a-port, colour: blue}
llama_stack: {url: "ftp://nope"}
authentication: {module: jwk-token}
mcp_servers: [{name: m}]
"""
    result = run("check-config", "-c", write(tmp_path / "bad.yaml", bad))
    assert result.returncode != 0
    for expected in ("service.port:", "service.colour: unknown key", "llama_stack.url:",
                     "authentication.jwk_config: required by module jwk-token", "mcp_servers[0].url:"):
        assert expected in result.stderr, (expected, result.stderr)


def test_check_config_env_substitution(tmp_path):
    config = "name: x\nllama_stack:\n  url: ${env.UPSTREAM_URL}\n  timeout: ${env.TIMEOUT:=12}\n"
    path = write(tmp_path / "env.yaml", config)
    assert run("check-config", "-c", path, env={"UPSTREAM_URL": "http://up:1"}).returncode == 0
    without = {key: value for key, value in os.environ.items() if key != "UPSTREAM_URL"}
    result = subprocess.run([str(GATEWAY_BIN), "check-config", "-c", path], capture_output=True, text=True,
                            env=without, timeout=60)
    assert result.returncode != 0
    assert "llama_stack.url: environment variable UPSTREAM_URL is not set" in result.stderr


def test_check_config_unreadable_file(tmp_path):
    result = run("check-config", "-c", str(tmp_path / "missing.yaml"))
    assert result.returncode != 0 and "cannot read" in result.stderr


def test_serve_with_config_from_environment(tmp_path, upstream):
    port = free_port()
    config = gateway_config(upstream.url, tmp_path / "db.sqlite")
    config["service"]["port"] = port
    path = write(tmp_path / "lightspeed-stack.yaml", config)
    proc = spawn("serve-env", [str(GATEWAY_BIN), "serve"], tmp_path, env={"LIGHTSPEED_STACK_CONFIG_PATH": path})
    try:
        wait_http(proc, f"http://127.0.0.1:{port}/liveness")
        reply = Gateway(proc, port).post("/v1/responses", {"input": "via env"})
        assert reply.status == 200
    finally:
        proc.stop()


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as raw:
        return dict(entry.decode().split("=", 1) for entry in raw.read().split(b"\0") if b"=" in entry)


# (Several tunables are composed as tests/test_allocator.py shows: glibc rewrites the variable's
# original bytes, which /proc shows, keeping only the first tunable of a list.)
@pytest.mark.parametrize("given, expected", [
    (None, f"glibc.malloc.tcache_count={TCACHE_COUNT}"),
    ("glibc.malloc.tcache_count=7", "glibc.malloc.tcache_count=7"),   # the operator's own
])
def test_serve_restarts_on_glibcs_allocator_with_a_larger_tcache(tmp_path, upstream, given, expected):
    port = free_port()
    config = gateway_config(upstream.url, tmp_path / "db.sqlite")
    config["service"]["port"] = port
    path = write(tmp_path / "c.yaml", config)
    # `env` runs the gateway without the variables the test run may have, and with the given one.
    argv = ["env", "-u", "PYTHONMALLOC", "-u", "GATEWAY_REEXECED", "-u", "GLIBC_TUNABLES",
            *([f"GLIBC_TUNABLES={given}"] if given is not None else []), str(GATEWAY_BIN), "serve", "-c", path]
    proc = spawn("serve-allocator", argv, tmp_path)
    try:
        wait_http(proc, f"http://127.0.0.1:{port}/liveness")
        # `env` executed the gateway, which restarted itself in place (the same pid).
        seen = _environ(proc.popen.pid)
        assert seen["PYTHONMALLOC"] == "malloc" and seen["GLIBC_TUNABLES"] == expected
        assert Gateway(proc, port).post("/v1/responses", {"input": "tcache"}).status == 200
    finally:
        proc.stop()


def test_python_dash_m_entry_point(tmp_path, upstream):
    port = free_port()
    config = gateway_config(upstream.url, tmp_path / "db.sqlite")
    config["service"]["port"] = port
    path = write(tmp_path / "c.yaml", config)
    proc = spawn("serve-m", [sys.executable, "-m", "gateway", "serve", "-c", path], tmp_path)
    try:
        wait_http(proc, f"http://127.0.0.1:{port}/liveness")
        reply = Gateway(proc, port).post("/v1/responses", {"input": "via python -m"})
        assert reply.ok()["output_text"] == "Scripted reply (turn 1, 1 messages): via python -m"
    finally:
        proc.stop()


def test_serve_warns_at_start_up_about_accepted_but_unbuilt_keys(gateway_factory, upstream):
    gateway = gateway_factory(upstream.url, compaction={"enabled": True},
                              service={"base_url": "https://gateway.example"})
    log = gateway.log()  # start-up is over once it answers: the warnings come before
    for key in ("compaction", "service.base_url"):
        assert f"{key}: accepted but not implemented by this version (ignored)" in log, log
    assert log.count("accepted but not implemented") == 2, log  # only what this config asks for
    assert gateway.post("/v1/responses", {"input": "still serving"}).status == 200


def test_serve_refuses_bad_config(tmp_path):
    result = run("serve", "-c", write(tmp_path / "bad.yaml", "name: x\nllama_stack: {}\n"))
    assert result.returncode == 2 and "llama_stack.url" in result.stderr


@pytest.mark.parametrize("flags, mode", [((), "forwarding"), (("--engine",), "local engine")])
def test_demo_serves_a_working_gateway(tmp_path, flags, mode):
    port = free_port()
    proc = spawn("demo", [str(GATEWAY_BIN), "demo", *flags, "--port", str(port), "--data-dir", str(tmp_path)],
                 tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(proc, f"{base}/readiness", ok=lambda status: status == 200)
        request = urllib.request.Request(f"{base}/v1/responses", data=json.dumps({"input": "Hello gateway"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["output_text"] == "Scripted reply (turn 1, 1 messages): Hello gateway"
        assert (tmp_path / "gateway.db").exists()
        assert "curl" in proc.log() and f"Mode: {mode}" in proc.log()
        # A readable access line per request (docs/tracing-and-logs.md).
        wait_until(lambda: "gateway.access: POST /v1/responses 200 " in proc.log(), "the demo's access line")
        line = next(line for line in proc.log().splitlines() if "gateway.access: POST /v1/responses 200 " in line)
        assert "model=" in line and "tokens=" in line and "request_id=" in line
        if flags:  # the engine keeps the responses itself
            with urllib.request.urlopen(f"{base}/v1/responses", timeout=10) as resp:
                assert [item["id"] for item in json.loads(resp.read())["data"]] == [body["id"]]
    finally:
        proc.stop()


def test_demo_on_a_busy_port_is_one_line_and_leaves_no_folder(tmp_path):
    import socket
    import tempfile
    from pathlib import Path

    before = set(Path(tempfile.gettempdir()).glob("gateway-demo-*"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("demo", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: port {port} on 127.0.0.1 is already in use by another process; "
        "choose another with --port N (make demo PORT=N)")
    assert "Traceback" not in result.stderr
    assert set(Path(tempfile.gettempdir()).glob("gateway-demo-*")) == before


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serve_on_a_busy_port_is_one_line_naming_the_key(tmp_path, upstream, workers, log_format):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = gateway_config(upstream.url, tmp_path / "db.sqlite")
        config["service"] = {**config["service"], "port": port, "workers": workers, "access_log_format": log_format}
        result = run("serve", "-c", write(tmp_path / "busy.yaml", config))
    expected = (f"error: port {port} on 127.0.0.1 is already in use by another process; "
                "choose another with service.port in the configuration or --port N")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert (json.loads(last)["message"] if log_format == "json" else last) == expected
