"""Whether this process shares its SQLite file with other gateway processes, and the
claim that keeps two that do not know of each other off one file.

`service.workers: N` (N > 1) runs N serving processes; the supervisor tells each it is
one of several (`GATEWAY_WORKERS=N`, or `GATEWAY_WORKER_ID` set). A process alone may
keep what it writes in memory (the conversation caches, the quota ledger: it is the
file's only writer); one of several may not, so its SQLite database is `shared`, as
PostgreSQL always is (docs/architecture.md, "Storage" and "Quotas").

The claim is a POSIX lock on `<file>.lock`, held while the database is open: exclusive
for a process alone, shared for workers. A second process alone on a file in use (or a
worker on a file a process alone holds, or the reverse) is refused with one line at
start, rather than silently losing quota updates or reading stale caches. POSIX locks
belong to the process, so one process opening the file twice (tests) never conflicts
with itself.
"""

from __future__ import annotations

import fcntl
import os

from gateway.storage.database import DatabaseUnavailable

WORKERS = "GATEWAY_WORKERS"
WORKER_ID = "GATEWAY_WORKER_ID"


def several_processes(environ: dict[str, str] | None = None) -> bool:
    """True when this process is one of several serving workers (the supervisor's env)."""
    env = os.environ if environ is None else environ
    try:
        if int(env.get(WORKERS, "1") or "1") > 1:
            return True
    except ValueError:
        pass
    return bool(env.get(WORKER_ID))


def claim(path: str, shared: bool) -> int:
    """Lock `<path>.lock` (shared for workers, exclusive alone) and return its file
    descriptor (closing it releases the claim); `DatabaseUnavailable` when another
    process holds it the other way."""
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        how = ("a gateway process that is not one of its workers" if shared
               else "another gateway process (several processes on one SQLite file: service.workers)")
        raise DatabaseUnavailable(f"database.sqlite_path {path} is in use by {how}") from None
    return fd
