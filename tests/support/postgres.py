"""A private PostgreSQL server for tests (Debian's binaries, set up by
scripts/postgres/setup.sh).

    server = start_postgres(log_dir)          # initdb + postgres on a free loopback port
    config = server.new_database()            # a fresh database and role: database.postgres keys
    server.stop()                             # stopped, its data directory removed

initdb and postgres refuse to run as root: as root they run as the unprivileged
`gateway-postgres` account (setpriv, which execs, so stopping the process stops the
server) with a data directory that account owns. Authentication is scram-sha-256 with a
password for every connection, TCP on 127.0.0.1 only; TLS too when started with a
test CA (`tls=`).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support.auth_peers import TestCa
from tests.support.processes import Proc, free_port, spawn

PG_USER = "gateway-postgres"
SUPERUSER = "gateway_admin"
SETUP_SCRIPT = "scripts/postgres/setup.sh"
REQUIRE_ENV = "GATEWAY_REQUIRE_POSTGRES"
START_TIMEOUT = 60.0


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda path: [int(part) for part in path.split("/")[4].split(".") if part.isdigit()])
    return Path(found[-1]).parent if found else None


def installed() -> bool:
    if postgres_bin() is None:
        return False
    if os.getuid() != 0:
        return True
    try:
        pwd.getpwnam(PG_USER)
        return True
    except KeyError:
        return False


def _as_server_user(argv: list[str]) -> list[str]:
    if os.getuid() != 0:
        return argv
    return ["setpriv", f"--reuid={PG_USER}", f"--regid={PG_USER}", "--init-groups", "--", *argv]


class PostgresServer:
    def __init__(self, proc: Proc, port: int, data: Path, password: str):
        self.proc = proc
        self.host = "127.0.0.1"
        self.port = port
        self._data = data
        self._password = password
        self.tls: TestCa | None = None  # the CA that signed the server's certificate, when TLS is on

    def superuser_dsn(self, db: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{self._password}@{self.host}:{self.port}/{db}"

    def admin(self, *statements: str, db: str = "postgres") -> list[list[Any]]:
        """Run statements as the superuser (asyncpg, each in its own transaction); the
        rows of the last."""
        import asyncio

        import asyncpg

        async def run() -> list[list[Any]]:
            conn = await asyncpg.connect(self.superuser_dsn(db))
            try:
                rows: list = []
                for statement in statements:
                    rows = await conn.fetch(statement)
                return [list(row.values()) for row in rows]
            finally:
                await conn.close()

        with ThreadPoolExecutor(1) as thread:  # its own loop, whether or not one runs here
            return thread.submit(asyncio.run, run()).result()

    def new_database(self, namespace: str = "gateway") -> dict[str, Any]:
        """A new role with a password and a database it owns: `database.postgres` keys."""
        name = f"gw_{uuid.uuid4().hex[:12]}"
        password = secrets.token_urlsafe(16)
        self.admin(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'", f"CREATE DATABASE {name} OWNER {name}")
        return {"host": self.host, "port": self.port, "db": name, "user": name, "password": password,
                "namespace": namespace, "ssl_mode": "disable", "gss_encmode": "disable"}

    def stop(self) -> None:
        self.proc.stop()
        shutil.rmtree(self._data, ignore_errors=True)


def start_postgres(log_dir: Path, tls: TestCa | None = None, core: int | None = None) -> PostgresServer:
    """`tls`: also accept TLS with a server certificate that CA signed for 127.0.0.1.
    `core`: run the server and every backend it forks on that CPU only (the benchmark
    keeps peers off the measured gateway's core)."""
    bin_dir = postgres_bin()
    assert bin_dir is not None and installed(), f"PostgreSQL is not set up: run {SETUP_SCRIPT}"
    # Not under pytest's tmp dirs: their parents are private to root.
    base = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
    data, sockets = base / "data", base / "sockets"
    password = secrets.token_urlsafe(16)
    (base / "pwfile").write_text(password + "\n")
    sockets.mkdir()
    if os.getuid() == 0:
        account = pwd.getpwnam(PG_USER)
        for path in (base, sockets, base / "pwfile"):
            os.chown(path, account.pw_uid, account.pw_gid)
    subprocess.run(_as_server_user([str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--pwfile",
                                    str(base / "pwfile"), "--auth=scram-sha-256", "--encoding=UTF8",
                                    "--no-sync", "--no-instructions"]),
                   check=True, capture_output=True, cwd="/")
    (base / "pwfile").unlink()
    options: list[str] = []
    if tls is not None:
        for source, name in zip(tls.server_files, ("server.pem", "server.key")):
            shutil.copyfile(source, base / name)
            os.chmod(base / name, 0o600)  # postgres refuses a key others can read
            if os.getuid() == 0:
                os.chown(base / name, account.pw_uid, account.pw_gid)
        options = ["-c", "ssl=on", "-c", f"ssl_cert_file={base / 'server.pem'}",
                   "-c", f"ssl_key_file={base / 'server.key'}"]
    port = free_port()
    # fsync off: a test server's data dies with the session; crashes are not tested here.
    # max_connections: a module's gateways live until the module ends (conftest's
    # module_gateways_stopped), each keeping its pool's idle connections and a LISTEN
    # connection; ~60 PostgreSQL gateways lived at once in a full run when they lasted the
    # session, with the storage suites' own pools beside them, which passed 200.
    pinned = ["taskset", "-c", str(core)] if core is not None else []
    proc = spawn(f"postgres-{port}", pinned + _as_server_user([
        str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
        "-c", f"unix_socket_directories={sockets}", "-c", "fsync=off", "-c", "max_connections=600",
        "-c", "password_encryption=scram-sha-256", *options]), log_dir, cwd=Path("/"))
    server = PostgresServer(proc, port, base, password)
    server.tls = tls
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"postgres exited with {proc.popen.returncode}:\n{proc.log()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            server.admin("SELECT 1")
            return server
        except Exception:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"postgres not ready on port {port}:\n{proc.log()}")
            time.sleep(0.1)
