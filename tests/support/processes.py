"""Start helper processes (gateway, scripted upstream, MCP server, Llama Stack) for tests.

Every end-to-end test talks to real processes over loopback sockets; this module owns
how they are started, how we wait for them to be ready and how they are stopped.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Proc:
    """A started process plus where its output goes, so a failed start can show it."""

    name: str
    popen: subprocess.Popen
    log_path: Path
    url: str = ""
    extra: dict = field(default_factory=dict)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)


def spawn(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Proc:
    """Start argv in its own process group with stdout+stderr in log_dir/<name>.log."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    out = open(log_path, "wb")
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                             cwd=str(cwd or ROOT), start_new_session=True)
    out.close()
    return Proc(name=name, popen=popen, log_path=log_path)


def wait_http(proc: Proc, url: str, timeout: float = 30.0, ok=lambda status: status < 500) -> None:
    """Poll url until it answers with a status ok() accepts; fail with the process log."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if ok(resp.status):
                    return
                last_error = f"status {resp.status}"
        except urllib.error.HTTPError as exc:
            if ok(exc.code):
                return
            last_error = f"status {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(exc)
        time.sleep(0.05)
    proc.stop()
    raise RuntimeError(f"{proc.name} not ready at {url} after {timeout}s ({last_error}):\n{proc.log()}")


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
