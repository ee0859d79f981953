"""Start, pin, watch and stop the processes the benchmark measures.

The gateway runs alone on core 0; the scripted upstream, the load generator and this
orchestrator share core 1, so whatever the gateway costs shows as time on core 0 and
the direct baseline is limited by the same core-1 budget (upstream + generator).
`--placement TARGET:LOAD` (`set_placement`) chooses other cores, lists as `taskset -c`
takes them: on a larger host `0-1:2-5` gives the target (a gateway with
`service.workers: 2`) two cores of its own and the upstream and load generators four
others.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from gateway.allocator import allocator_env

ROOT = Path(__file__).resolve().parents[1]
# CPU lists as `taskset -c` takes them ("0", "0-1", "2,4-5"); `set_placement` changes
# them before anything starts. Read them as `procs.GATEWAY_CORE` (not imported by value).
GATEWAY_CORE = "0"  # the measured target: the relay, nginx or the gateway (all its workers)
LOAD_CORE = "1"     # upstream + load generator + this process
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_set(cpu_list: str) -> set[int]:
    """`taskset -c`'s list ("0-1,4") as a set of core numbers."""
    cores: set[int] = set()
    for part in cpu_list.split(","):
        first, _, last = part.strip().partition("-")
        cores.update(range(int(first), int(last or first) + 1))
    return cores


def set_placement(placement: str) -> None:
    """`--placement TARGET:LOAD`, e.g. `0:1` (the default) or `0-1:2-5`: two disjoint CPU lists."""
    global GATEWAY_CORE, LOAD_CORE
    target, sep, load = placement.partition(":")
    try:
        if not sep or not cpu_set(target) or not cpu_set(load):
            raise ValueError(placement)
    except ValueError:
        sys.exit(f"bench: --placement takes TARGET:LOAD CPU lists, e.g. 0:1 or 0-1:2-5 (got {placement!r})")
    if cpu_set(target) & cpu_set(load):
        sys.exit(f"bench: --placement {placement}: the target's and the load's cores must not overlap")
    GATEWAY_CORE, LOAD_CORE = target, load


def check_cores() -> None:
    """Pinning needs the placement's cores; with fewer the comparison means nothing."""
    cores = os.sched_getaffinity(0) | set(range(os.cpu_count() or 1))
    if not cpu_set(GATEWAY_CORE) | cpu_set(LOAD_CORE) <= cores:
        sys.exit(f"bench: needs CPU cores {GATEWAY_CORE} and {LOAD_CORE} (this machine has {sorted(cores)})")
    if shutil.which("taskset") is None:
        sys.exit("bench: `taskset` (util-linux) is required")


def pin_self() -> None:
    """The orchestrator (and the probe clients it runs) stays off the gateway's core."""
    os.sched_setaffinity(0, cpu_set(LOAD_CORE))


def _children(pid: int) -> list[int]:
    """The process's children (a gateway's workers), from /proc's per-thread lists."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(child) for child in f.read().split()]
    except OSError:
        pass
    return found


def _own_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        # The command name (field 2) may hold spaces; fields after it are plain.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def raise_open_files(wanted: int = 65536) -> int:
    """1000 held streams need 2000+ sockets in the gateway and 1000 here; children inherit this."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def ensure_debian_package(binary: str, package: str) -> str:
    """The load generator comes from Debian; install it when it is missing (and say so)."""
    found = shutil.which(binary)
    if found:
        return found
    print(f"bench: `{binary}` is missing; installing the Debian package `{package}` "
          f"(apt-get install -y {package})", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*sudo, "apt-get", "install", "-y", "-q", package]
    if subprocess.run(install, env=env).returncode != 0:
        # A fresh machine may have no package lists yet.
        print("bench: apt-get install failed; running apt-get update and retrying", flush=True)
        subprocess.run([*sudo, "apt-get", "update", "-q"], env=env, check=False)
        subprocess.run(install, env=env, check=False)
    found = shutil.which(binary)
    if not found:
        sys.exit(f"bench: could not install `{package}`; install it by hand (apt-get install {package})")
    return found


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    port: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        """utime + stime of the whole process (all threads) from /proc/<pid>/stat, and of
        its live children's (a gateway with `service.workers` > 1 serves from children:
        their CPU is the target's; a child that exited meanwhile is not counted)."""
        total, pending = 0.0, [self.pid]
        while pending:
            pid = pending.pop()
            try:
                total += _own_cpu_seconds(pid)
            except OSError:
                if pid == self.pid:
                    raise
                continue
            pending += _children(pid)
        return total

    def rss_kib(self) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError(f"{self.name}: no VmRSS in /proc/{self.pid}/status")

    def stop(self) -> None:
        """SIGTERM our own process group (the process and nothing else we did not start)."""
        if self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
            self.popen.wait(15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)


def _spawn(name: str, argv: list[str], core: str, workdir: Path, env: dict[str, str], port: int) -> Proc:
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as out:
        # taskset execs the program, so the pid we get is the measured process itself.
        popen = subprocess.Popen(["taskset", "-c", str(core), *argv], stdout=out, stderr=subprocess.STDOUT,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1", **env}, cwd=str(ROOT),
                                 start_new_session=True)
    return Proc(name, popen, port, log_path)


def _wait_http(proc: Proc, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log_tail()}")
        try:
            with urllib.request.urlopen(proc.url + path, timeout=2) as resp:
                if resp.status < 500:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    proc.stop()
    raise RuntimeError(f"{proc.name} did not answer {path} within {timeout}s:\n{proc.log_tail()}")


def start_upstream(workdir: Path, plain: bool = False, *extra: str, name: str = "upstream") -> Proc:
    """The scripted upstream on the load core: zero delay, nothing recorded.

    By default it runs through `bench.upstream`, which is the same server with CPython's
    full (generation-2) collections switched off: it keeps up to 100k responses in
    memory, and collecting that heap paused it for up to 0.5 s, which made the direct
    baseline swing between runs. `plain=True` runs `python -m gateway.devserver` as is.
    """
    port = free_port()
    module = "gateway.devserver" if plain else "bench.upstream"
    argv = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port), "--no-record",
            "--delay-ms", "0", *extra]
    proc = _spawn(name, argv, LOAD_CORE, workdir, {}, port)
    _wait_http(proc, "/health")
    return proc


def start_mcp_server(workdir: Path) -> Proc:
    """The engine scenario's MCP server (`bench.mcp_server`) on the load core."""
    port = free_port()
    proc = _spawn("mcp-server", [sys.executable, "-m", "bench.mcp_server", "--port", str(port)], LOAD_CORE,
                  workdir, {}, port)
    _wait_http(proc, "/mcp")  # a GET without a session: a 4xx once it listens
    return proc


def start_relay(workdir: Path, upstream_url: str) -> Proc:
    """The naive relay (`bench.relay`) on the gateway's core: the baseline it must beat."""
    port = free_port()
    argv = [sys.executable, "-m", "bench.relay", "--upstream", upstream_url, "--port", str(port)]
    proc = _spawn("relay", argv, GATEWAY_CORE, workdir, {}, port)
    _wait_http(proc, "/liveness")
    return proc


NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {home}/nginx.pid;
error_log {home}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {home}/body;
    proxy_temp_path {home}/proxy;
    fastcgi_temp_path {home}/fastcgi;
    uwsgi_temp_path {home}/uwsgi;
    scgi_temp_path {home}/scgi;
    upstream scripted {{ server {upstream}; keepalive 512; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://scripted;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def start_nginx(workdir: Path, upstream_url: str) -> Proc:
    """nginx as a plain reverse proxy (`bench/run --nginx`): one process, no worker
    children, so its CPU is one pid's; response buffering off, as SSE needs."""
    binary = ensure_debian_package("nginx", "nginx-light")
    port = free_port()
    home = workdir / "nginx"
    home.mkdir(parents=True, exist_ok=True)
    conf = home / "nginx.conf"
    conf.write_text(NGINX_CONF.format(home=home, upstream=upstream_url.removeprefix("http://"), port=port))
    proc = _spawn("nginx", [binary, "-c", str(conf), "-p", str(home)], GATEWAY_CORE, workdir, {}, port)
    _wait_http(proc, "/health")
    return proc


def gateway_config(upstream_url: str, db_path: Path, port: int, authentication: dict | None = None) -> dict:
    return {
        "name": "gateway benchmark",
        # Every connection of the load generators is the one noop user: the cap on a user's
        # responses in progress (64 by default, a defence against one account) would
        # refuse the memory and paced scenarios' streams, which a deployment serves to
        # many users.
        "service": {"host": "127.0.0.1", "port": port, "access_log": False,
                    "max_responses_in_progress_per_user": 1_000_000},
        # A generous pool: the benchmark, not the pool, should decide the concurrency.
        "llama_stack": {"url": upstream_url, "max_retries": 0, "max_connections": 4096, "timeout": 60},
        "authentication": authentication or {"module": "noop"},
        "database": {"sqlite": {"db_path": str(db_path)}},
        # A new conversation's topic summary is a second upstream call: off, so a turn
        # costs one call and the figures stay comparable with earlier runs.
        "customization": {"topic_summaries": False},
    }


def start_gateway(workdir: Path, upstream_url: str, name: str = "gateway", gc_stats: Path | None = None,
                  authentication: dict | None = None, api: str = "auto", extra: dict | None = None,
                  service: dict | None = None, spin_us: float = 0, workers: int = 1) -> Proc:
    """`gateway serve -c FILE` on the gateway core, with its own SQLite file (`extra`:
    top-level keys that replace the defaults, e.g. `database`, `quota_handlers`;
    `service`: keys added to the `service` section, e.g. `metrics`).

    `gc_stats`: run it through `bench.gcstats`, which times its garbage collections (--profile only).
    `spin_us`: run it through `bench.spin`, which adds that much CPU to every request (the
    metrics workload's check of its own reading, `--metrics-known-cost-us`).
    `workers`: `service.workers` (`--gateway-workers`); its CPU is counted over the process
    and its children (`Proc.cpu_seconds`), all pinned to the target's cores.
    """
    port = free_port()
    home = workdir / name
    home.mkdir(parents=True, exist_ok=True)
    config_path = home / "lightspeed-stack.yaml"
    config = gateway_config(upstream_url, home / "gateway.db", port, authentication)
    config["llama_stack"]["api"] = api  # chat_completions: the local engine
    if workers != 1:
        config["service"]["workers"] = workers
    config["service"].update(service or {})
    config.update(extra or {})
    config_path.write_text(yaml.safe_dump(config))
    script = Path(sys.executable).parent / "gateway"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "gateway"]
    env = {"GATEWAY_LOG_LEVEL": os.environ.get("BENCH_GATEWAY_LOG_LEVEL", "WARNING")}
    if gc_stats is not None:
        command = [sys.executable, "-m", "bench.gcstats", str(gc_stats)]
        # As `gateway serve` runs itself (it restarts on glibc's allocator otherwise,
        # which would replace the wrapper).
        env.update(allocator_env(os.environ))
    elif spin_us:
        command = [sys.executable, "-m", "bench.spin", str(spin_us)]
        env.update(allocator_env(os.environ))   # as for gcstats: the gateway would restart without the wrapper
    proc = _spawn(name, [*command, "serve", "-c", str(config_path)], GATEWAY_CORE, workdir, env, port)
    _wait_http(proc, "/liveness")
    return proc
