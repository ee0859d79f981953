"""The `gateway` command: `serve`, `check-config` and `demo`."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import logging
import os
import shutil
import sys
from typing import NoReturn

from aiohttp import web

from gateway import allocator
from gateway.config import ConfigError, Configuration, load_config
from gateway.storage.database import DatabaseUnavailable

CONFIG_ENV = "LIGHTSPEED_STACK_CONFIG_PATH"


# Set by the supervisor of `service.workers` in each worker's environment (http/supervisor.py).
WORKER_ID = "GATEWAY_WORKER_ID"
LISTEN_FDS = "GATEWAY_LISTEN_FDS"


def _setup_logging() -> None:
    worker = os.environ.get(WORKER_ID)
    where = f" [worker {worker}]" if worker else ""   # which worker wrote a line (JSON lines: `worker`)
    logging.basicConfig(level=os.environ.get("GATEWAY_LOG_LEVEL", "INFO").upper(),
                        format=f"%(asctime)s %(levelname)s %(name)s{where}: %(message)s")


def _config_path(args: argparse.Namespace) -> str:
    path = args.config or os.environ.get(CONFIG_ENV)
    if not path:
        sys.exit(f"error: no configuration file: pass -c FILE or set {CONFIG_ENV}")
    return path


def _load(path: str) -> Configuration:
    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"{path}: the configuration is not valid:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        sys.exit(2)


def check_config(args: argparse.Namespace) -> int:
    path = _config_path(args)
    config = _load(path)
    for warning in config.warnings() + config.authentication.warnings():
        print(f"warning: {warning}")
    print(f"{path}: OK")
    return 0


def _run(config: Configuration, host: str | None = None, port: int | None = None) -> None:
    from gateway.app import create_app
    from gateway.http import server
    from gateway.http.header_limits import install_log_filter

    app = create_app(config)
    app.cleanup_ctx.append(allocator.background)
    _tune_gc()
    install_log_filter()
    sockets = None
    if os.environ.get(LISTEN_FDS):   # a worker of `service.workers`: the supervisor's listener
        from gateway.http.supervisor import inherited_sockets
        sockets = inherited_sockets()
    try:
        server.run(app, config.service, loop=_event_loop(), host=host or config.service.host,
                   port=port or config.service.port,
                   # aiohttp's access log is replaced by the gateway's own line (service.access_log,
                   # gateway/observability/access_log.py), written by the middleware.
                   access_log=None,
                   announce=logging.getLogger("gateway").info, sockets=sockets)
    except DatabaseUnavailable as exc:  # at start-up: the message names the key and the server
        _fatal(config, f"error: {exc}")
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        _fatal(config, port_in_use(host or config.service.host, port or config.service.port, _CHANGE_PORT))


# How an operator changes the port `gateway serve` listens on.
_CHANGE_PORT = "service.port in the configuration or --port N"


def _fatal(config: Configuration, message: str) -> NoReturn:
    """One line, then exit 1: a log line like every other under JSON logs, else stderr."""
    if config.service.access_log_format == "json":
        logging.getLogger("gateway").critical("%s", message)
        sys.exit(1)
    sys.exit(message)


def _event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed: its C transports halve the event loop's share of each
    request (socket reads and writes are most of a relay's cost). Plain asyncio
    otherwise (GATEWAY_EVENT_LOOP=asyncio forces it)."""
    if os.environ.get("GATEWAY_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def _tune_gc() -> None:
    """Collect less often and never rescan what start-up built: on the hot path, young
    collections over short-lived request objects are pure overhead."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def serve(args: argparse.Namespace) -> int:
    _use_system_allocator(args.argv)
    _setup_logging()
    config = _load(_config_path(args))
    if config.service.access_log_format == "json":   # every line JSON, not only the access lines
        from gateway.observability.json_logs import use_json_logs
        use_json_logs()
    if config.service.workers > 1 and not os.environ.get(LISTEN_FDS):
        return _supervise(config, args)
    _run(config, args.host, args.port)
    return 0


def _supervise(config: Configuration, args: argparse.Namespace) -> int:
    """`service.workers` > 1: this process binds the port and runs the workers
    (`gateway/http/supervisor.py`); each is `gateway serve` again, with the same arguments."""
    from gateway.http.supervisor import exec_supervisor, listening_sockets

    host, port = args.host or config.service.host, args.port or config.service.port
    try:
        sockets = listening_sockets(host, port, config.service.workers)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            _fatal(config, port_in_use(host, port, _CHANGE_PORT))
        logging.getLogger("gateway").critical("error: cannot listen on %s:%d: %s", host, port, exc)
        return 1
    where = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
    return exec_supervisor(config.service.workers, args.argv, sockets, config.service.shutdown_grace_seconds,
                           where, json_logs=config.service.access_log_format == "json")


def _use_system_allocator(argv: list[str]) -> None:
    """Run the server on the C library's allocator (`PYTHONMALLOC=malloc`), restarting
    the process in place (same pid) if it was started without it.

    CPython's own allocator returns a 1 MiB arena to the system only when every object
    in it is gone, and a few objects that outlive a load (caches, interned strings) pin
    many: after 1,000 streams the process stayed 19 MiB above its idle size for good.
    glibc's allocator gives back free pages (`allocator.release`), and costs no more CPU
    here (bench/, A/B). Setting PYTHONMALLOC (to anything) keeps the caller's choice. The
    restart also raises glibc's per-thread cache of freed chunks (`allocator.allocator_env`)."""
    if "PYTHONMALLOC" in os.environ or os.environ.get("GATEWAY_REEXECED"):
        return
    env = {**os.environ, **allocator.allocator_env(os.environ), "GATEWAY_REEXECED": "1"}
    try:
        os.execve(sys.executable, [sys.executable, "-m", "gateway", *argv], env)
    except OSError as exc:  # no exec here (an embedded interpreter): run as we are
        logging.getLogger("gateway").warning("could not restart on the system allocator: %s", exc)


def demo(args: argparse.Namespace) -> int:
    _setup_logging()
    from gateway.demo import demo_app

    app, banner, workdir = demo_app(args.port, args.data_dir, engine=args.engine)
    try:
        print(banner, flush=True)
        web.run_app(app, host="127.0.0.1", port=args.port, handler_cancellation=True, print=None,
                    access_log=None, shutdown_timeout=5)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        sys.exit(port_in_use("127.0.0.1", args.port, "--port N (make demo PORT=N)"))
    finally:
        if args.data_dir is None:   # the demo's own temporary folder, also after a failed start
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def port_in_use(host: str, port: int, change_it: str) -> str:
    """The one line a busy port gets, in place of the traceback of the bind."""
    return f"error: port {port} on {host} is already in use by another process; choose another with {change_it}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the gateway")
    run.add_argument("-c", "--config", help=f"lightspeed-stack.yaml (default: ${CONFIG_ENV})")
    run.add_argument("--host", help="override service.host")
    run.add_argument("--port", type=int, help="override service.port")
    run.set_defaults(func=serve)
    check = commands.add_parser("check-config", help="validate a configuration file and exit")
    check.add_argument("-c", "--config", help=f"lightspeed-stack.yaml (default: ${CONFIG_ENV})")
    check.set_defaults(func=check_config)
    try_it = commands.add_parser("demo", help="run the gateway in front of the bundled scripted upstream")
    try_it.add_argument("--port", type=int, default=8080)
    try_it.add_argument("--data-dir", help="where the demo keeps its SQLite file (default: a temp dir)")
    try_it.add_argument("--engine", action="store_true",
                        help="run the Responses API on the gateway's local engine over the scripted "
                             "upstream's Chat Completions (default: forward to its Responses API)")
    try_it.set_defaults(func=demo)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
