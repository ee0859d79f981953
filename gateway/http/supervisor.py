"""`service.workers: N` (N > 1): `gateway serve` becomes a supervisor of N serving
processes on one port (docs/operating.md, "Workers").

The supervisor binds the listening sockets, one per worker (`SO_REUSEPORT`: the kernel
spreads new connections over them by a hash of the connection, so over the workers),
and keeps its own copy of each while it runs; worker N inherits socket N (its
descriptors in `GATEWAY_LISTEN_FDS`). Closing a socket resets the connections still
queued in it; since the supervisor holds every socket, a worker that dies closes
nothing: what the kernel queued for it waits for its replacement, which inherits the
same socket. The supervisor only binds them: a worker listens on its socket when it
starts serving, so the kernel hands a starting worker nothing before it can take it.
At a drain the supervisor closes its copies first, and each worker takes
its queue before it closes its socket (`server._backlog`). Not one socket shared by
every worker: the worker woken first accepts every connection queued (an event loop
accepts in a loop), so connections opened at once can all land on one worker, for
good when they are kept alive. Measured here (two workers, 16 keep-alive connections
opened at once, three runs): one shared socket 16:0, 6:10, 8:8; a socket per worker
9:7, 8:8, 10:6.

`gateway serve` reads the configuration, binds the port, then becomes this module
(`exec`, the same pid, the sockets kept): a supervisor without the gateway's modules
loaded holds ~21 MiB instead of ~54. Each worker is `python -m gateway serve ...` again (a fresh interpreter, nothing of the
supervisor's state forked into it), with `GATEWAY_WORKER_ID` (its index, 0..N-1),
`GATEWAY_WORKERS` (N) and `PROMETHEUS_MULTIPROC_DIR` (a private directory the supervisor
creates and removes) in its environment, in a process group of its own (a terminal's
Ctrl-C or a `kill` of the group reaches the supervisor only, which passes it on once)
and ended by the kernel with SIGTERM if the supervisor dies (`PR_SET_PDEATHSIG`).

Start: worker 0 first, alone, until it serves: what a start does once (migrations, the
background watch's sweep of what a stopped gateway left) runs in one process before the
others open the database. Worker 0 failing to start ends the supervisor with its status
(its own log line says why). Then the others. A worker that dies is logged and started
again, at once if it had run for a while, else after a delay that doubles with each
quick death (0.5 s to 30 s), so a crash loop does not spin. SIGTERM (or SIGINT): the
supervisor closes its copies of the sockets and passes the signal to every worker, each
drains (`http/drain.py`); a second signal is passed on too (no more grace). It exits 0
once every worker exited 0.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from gateway.user_ids import GROUP_KEY

log = logging.getLogger("gateway.workers")

WORKER_ID = "GATEWAY_WORKER_ID"
WORKERS = "GATEWAY_WORKERS"
LISTEN_FDS = "GATEWAY_LISTEN_FDS"
READY_FD = "GATEWAY_READY_FD"
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
# A worker that ran this long before it died is restarted at once.
STABLE_S = 30.0
FIRST_DELAY_S = 0.5
MOST_DELAY_S = 30.0
# After the drain's own bounds (grace, then drain.AFTER_GRACE_S and server.LEFTOVER_SECONDS):
# a worker still there this much later is killed.
STOP_MARGIN_S = 15.0
_PR_SET_PDEATHSIG = 1


class Backoff:
    """How long to wait before starting a worker again, from how long it ran."""

    def __init__(self, first: float = FIRST_DELAY_S, most: float = MOST_DELAY_S, stable: float = STABLE_S):
        self.first, self.most, self.stable = first, most, stable
        self.quick = 0   # deaths in a row, each soon after its start

    def delay(self, lived: float) -> float:
        if lived >= self.stable:
            self.quick = 0
            return 0.0
        self.quick += 1
        return min(self.most, self.first * 2.0 ** (self.quick - 1))


@dataclass
class Slot:
    index: int
    backoff: Backoff = field(default_factory=Backoff)
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ready: bool = False
    restart_at: float | None = None


def listening_sockets(host: str, port: int, count: int) -> list[list[socket.socket]]:
    """For each of `count` workers, its sockets: bound to every address `host` resolves
    to (as asyncio's `create_server` binds them), with `SO_REUSEPORT`, inheritable, not
    yet listening (the worker listens once it serves: `server.run`'s `SockSite`). The
    port is first bound without `SO_REUSEPORT`, so a port another process listens on
    (another gateway's workers included) is refused, not shared (two gateways started
    in the same second, before either listens, are not told apart)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = list({address: (family, kind, proto) for family, kind, proto, _, address in infos}.items())
    for address, (family, kind, proto) in addresses:
        with socket.socket(family, kind, proto) as probe:
            _options(probe, family, reuse_port=False)
            probe.bind(address)
    slots: list[list[socket.socket]] = []
    try:
        for _ in range(count):
            slot: list[socket.socket] = []
            slots.append(slot)
            for address, (family, kind, proto) in addresses:
                sock = socket.socket(family, kind, proto)
                slot.append(sock)
                _options(sock, family, reuse_port=True)
                sock.bind(address)
                sock.set_inheritable(True)
    except OSError:
        for sock in (sock for slot in slots for sock in slot):
            sock.close()
        raise
    return slots


def _options(sock: socket.socket, family: int, reuse_port: bool) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)


def inherited_sockets(environ: Mapping[str, str] = os.environ) -> list[socket.socket] | None:
    """In a worker: the supervisor's listening sockets (None: not a worker)."""
    fds = environ.get(LISTEN_FDS)
    if not fds:
        return None
    return [socket.socket(fileno=int(fd)) for fd in fds.split(",")]


def announce_ready(environ: Mapping[str, str] = os.environ) -> None:
    """In a worker, once it serves: tell the supervisor (a line on its pipe)."""
    fd = environ.get(READY_FD)
    if fd is None:
        return
    try:
        os.write(int(fd), f"{environ.get(WORKER_ID, '?')} {os.getpid()}\n".encode())
        os.close(int(fd))
    except OSError:   # the supervisor is gone: PDEATHSIG ends this process
        pass


def worker_env(base: Mapping[str, str], index: int, count: int, fds: list[int], ready_fd: int,
               metrics_dir: str, hash_key: str) -> dict[str, str]:
    return {**base, WORKER_ID: str(index), WORKERS: str(count), LISTEN_FDS: ",".join(map(str, fds)),
            READY_FD: str(ready_fd), MULTIPROC_DIR: metrics_dir, GROUP_KEY: hash_key}


def _die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` asking the kernel to send the child SIGTERM when the supervisor
    dies (Linux; elsewhere nothing), so no worker outlives it unsupervised."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return lambda: None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    return preexec


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


class Supervisor:
    def __init__(self, count: int, argv: list[str], sockets: list[list[socket.socket]], grace: float,
                 where: str):
        self.count = count
        self.argv = argv            # `gateway` arguments the workers are started with
        self.sockets = sockets      # each worker's, held while the supervisor runs
        self.grace = grace
        self.where = where          # for the log: http://host:port
        self.slots = [Slot(i) for i in range(count)]
        self.stopping: int | None = None   # the signal that started the stop
        self.stop_deadline = 0.0
        self.failed = False         # a worker ended its drain other than with 0
        self._signals: list[int] = []
        self._metrics_dir = ""
        self._ready_r = self._ready_w = -1
        self._preexec = _die_with_parent()
        self._all_ready_logged = False
        self._hash_key = os.urandom(32).hex()   # the users' hash key, without OTEL_ANONYMIZATION_SECRET

    # The loop.

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        self._ready_r, self._ready_w = os.pipe()
        os.set_blocking(self._ready_r, False)
        self._metrics_dir = tempfile.mkdtemp(prefix="gateway-metrics-")
        previous = signal.set_wakeup_fd(wake_w)
        handlers = {number: signal.signal(number, self._on_signal)
                    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)}
        try:
            status = self._supervise(wake_r)
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
            signal.set_wakeup_fd(previous)
            for fd in (wake_r, wake_w, self._ready_r, self._ready_w):
                os.close(fd)
            self._close_sockets()
            shutil.rmtree(self._metrics_dir, ignore_errors=True)
        return status

    def _on_signal(self, number: int, frame: Any) -> None:
        self._signals.append(number)

    def _supervise(self, wake_r: int) -> int:
        first = self.slots[0]
        self._start(first)
        others_started = False
        while True:
            self._wait(wake_r)
            for number in self._take_signals():
                self._stop(number)
            self._read_ready()
            for slot in self.slots:
                status = slot.process.poll() if slot.process is not None else None
                if status is None or slot.process is None:
                    continue
                if not others_started and slot is first and self.stopping is None:
                    log.critical("worker 0 (pid %d) did not start (%s): stopping", slot.process.pid,
                                 _describe(status))
                    return status if status > 0 else 1
                self._ended(slot, status)
            if self.stopping is None and not others_started and first.ready:
                others_started = True
                for slot in self.slots[1:]:
                    self._start(slot)
            if self.stopping is not None:
                if not any(slot.process is not None for slot in self.slots):
                    log.info("all workers stopped")
                    return 1 if self.failed else 0
                if time.monotonic() > self.stop_deadline:
                    self._kill_left()
                continue
            now = time.monotonic()
            for slot in self.slots:
                if slot.process is None and slot.restart_at is not None and now >= slot.restart_at:
                    self._start(slot)

    def _wait(self, wake_r: int) -> None:
        timeout = 1.0
        now = time.monotonic()
        for slot in self.slots:
            if slot.restart_at is not None:
                timeout = max(0.0, min(timeout, slot.restart_at - now))
        try:
            readable, _, _ = select.select([wake_r, self._ready_r], [], [], timeout)
        except InterruptedError:
            return
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass

    def _take_signals(self) -> list[int]:
        taken = [number for number in self._signals if number != signal.SIGCHLD]
        self._signals.clear()
        return taken

    def _read_ready(self) -> None:
        try:
            data = os.read(self._ready_r, 4096)
        except BlockingIOError:
            return
        for line in data.decode(errors="replace").splitlines():
            index, _, pid = line.partition(" ")
            for slot in self.slots:
                if str(slot.index) == index and slot.process is not None and str(slot.process.pid) == pid:
                    slot.ready = True
                    log.info("worker %d (pid %s) is serving", slot.index, pid)
        if not self._all_ready_logged and all(slot.ready for slot in self.slots):
            self._all_ready_logged = True
            log.info("======== Running on %s (%d workers) ========", self.where, self.count)

    # Workers.

    def _start(self, slot: Slot) -> None:
        fds = [sock.fileno() for sock in self.sockets[slot.index]]
        env = worker_env(os.environ, slot.index, self.count, fds, self._ready_w, self._metrics_dir,
                         self._hash_key)
        slot.process = subprocess.Popen([sys.executable, "-m", "gateway", *self.argv], env=env,
                                        pass_fds=(*fds, self._ready_w), process_group=0,
                                        preexec_fn=self._preexec)
        slot.started, slot.ready, slot.restart_at = time.monotonic(), False, None
        log.info("worker %d started (pid %d)", slot.index, slot.process.pid)

    def _ended(self, slot: Slot, status: int) -> None:
        assert slot.process is not None
        pid = slot.process.pid
        slot.process = None
        slot.ready = False
        self._forget_metrics(pid)
        if self.stopping is not None:
            clean = status == 0 or status in (-signal.SIGTERM, -signal.SIGINT)
            self.failed |= not clean
            (log.info if clean else log.error)("worker %d (pid %d) stopped (%s)", slot.index, pid,
                                              _describe(status))
            return
        lived = time.monotonic() - slot.started
        delay = slot.backoff.delay(lived)
        slot.restart_at = time.monotonic() + delay
        log.error("worker %d (pid %d) died (%s) after %.1f s: starting it again%s", slot.index, pid,
                  _describe(status), lived, f" in {delay:g} s" if delay else "")

    def _forget_metrics(self, pid: int) -> None:
        """A dead worker's live gauges leave the aggregate (its counters stay: what it
        counted happened)."""
        try:
            from prometheus_client import multiprocess
        except ImportError:
            return
        try:
            multiprocess.mark_process_dead(pid, self._metrics_dir)
        except OSError as exc:
            log.warning("removing worker pid %d's metrics files: %s", pid, exc)

    def _stop(self, number: int) -> None:
        first = self.stopping is None
        if first:
            self.stopping = number
            self.stop_deadline = time.monotonic() + self.grace + STOP_MARGIN_S
            # The workers' descriptors are the last: each drain takes what is queued.
            self._close_sockets()
            log.info("%s: stopping %d worker(s)", signal.Signals(number).name,
                     sum(slot.process is not None for slot in self.slots))
        for slot in self.slots:
            slot.restart_at = None
            if slot.process is not None:
                try:
                    slot.process.send_signal(number)
                except ProcessLookupError:
                    pass

    def _kill_left(self) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                log.error("worker %d (pid %d) still running %g s after the signal: killed", slot.index,
                          slot.process.pid, self.grace + STOP_MARGIN_S)
                slot.process.kill()
        self.stop_deadline = time.monotonic() + 5

    def _close_sockets(self) -> None:
        for slot in self.sockets:
            for sock in slot:
                sock.close()


def exec_supervisor(count: int, argv: list[str], sockets: list[list[socket.socket]], grace: float, where: str,
                    json_logs: bool) -> int:
    """From `gateway serve`: become the supervisor (`main`), keeping the pid and the
    bound sockets; where exec is not possible, supervise from this process."""
    command = [sys.executable, "-m", "gateway.http.supervisor", "--workers", str(count), "--grace", str(grace),
               "--where", where, "--fds", ";".join(",".join(str(sock.fileno()) for sock in slot) for slot in sockets),
               "--argv", json.dumps(argv)] + (["--json-logs"] if json_logs else [])
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, command)
    except OSError as exc:
        log.warning("could not start a separate supervisor (%s): supervising from this process", exc)
    return Supervisor(count, argv, sockets, grace, where).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.http.supervisor",
                                     description="what `gateway serve` becomes with service.workers > 1")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--where", required=True)
    parser.add_argument("--fds", required=True, help="each worker's listening sockets' descriptors: 3,4;5,6")
    parser.add_argument("--argv", required=True, help="the workers' `gateway` arguments, as a JSON list")
    parser.add_argument("--json-logs", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("GATEWAY_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.json_logs:
        from gateway.observability.json_logs import use_json_logs

        use_json_logs()
    sockets = [[socket.socket(fileno=int(fd)) for fd in slot.split(",")] for slot in args.fds.split(";")]
    return Supervisor(args.workers, json.loads(args.argv), sockets, args.grace, args.where).run()


if __name__ == "__main__":
    sys.exit(main())
