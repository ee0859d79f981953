"""The supervisor of `service.workers` (gateway/http/supervisor.py), its parts alone: the
restart backoff, a worker's environment, the listening sockets a worker inherits and
its ready line. The processes themselves: tests/e2e/test_workers.py."""

from __future__ import annotations

import os
import socket

from gateway.http import supervisor
from gateway.user_ids import GROUP_KEY, UserHasher


def test_a_worker_that_ran_a_while_is_restarted_at_once():
    backoff = supervisor.Backoff(first=0.5, most=30, stable=30)
    assert backoff.delay(lived=3600) == 0


def test_quick_deaths_in_a_row_double_the_delay_up_to_the_bound():
    backoff = supervisor.Backoff(first=0.5, most=30, stable=30)
    assert [backoff.delay(lived=1) for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert backoff.delay(lived=31) == 0          # it ran: the count starts again
    assert backoff.delay(lived=1) == 0.5


def test_a_workers_environment():
    env = supervisor.worker_env({"PATH": "/bin"}, 1, 3, [5, 6], 9, "/tmp/m", "ab" * 32)
    assert env == {"PATH": "/bin", "GATEWAY_WORKER_ID": "1", "GATEWAY_WORKERS": "3", "GATEWAY_LISTEN_FDS": "5,6",
                   "GATEWAY_READY_FD": "9", "PROMETHEUS_MULTIPROC_DIR": "/tmp/m", GROUP_KEY: "ab" * 32}


def test_workers_given_the_group_key_hash_a_user_alike():
    key = os.urandom(32).hex()
    one, other = UserHasher({GROUP_KEY: key}), UserHasher({GROUP_KEY: key})
    assert one("ann") == other("ann") and not one.keyed
    assert UserHasher({})("ann") != UserHasher({})("ann")   # alone: a key of its own
    assert UserHasher({"OTEL_ANONYMIZATION_SECRET": "s3cret", GROUP_KEY: key})("ann") \
        == UserHasher({"OTEL_ANONYMIZATION_SECRET": "s3cret"})("ann")   # the operator's key first


def test_each_worker_gets_a_socket_of_its_own_on_the_port_and_the_port_is_not_shared_with_others():
    import pytest

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(OSError):   # another process's port: refused, not joined
            supervisor.listening_sockets("127.0.0.1", port, 2)
    slots = supervisor.listening_sockets("127.0.0.1", port, 2)
    try:
        assert [len(slot) for slot in slots] == [1, 1] and all(slot[0].get_inheritable() for slot in slots)
        assert {slot[0].getsockname() for slot in slots} == {("127.0.0.1", port)}
        inherited = supervisor.inherited_sockets({supervisor.LISTEN_FDS: str(os.dup(slots[0][0].fileno()))})
        assert inherited is not None and inherited[0].getsockname() == ("127.0.0.1", port)
        inherited[0].listen(8)   # the worker listens (its SockSite)
        with pytest.raises(OSError):   # then not joinable by another gateway's workers
            supervisor.listening_sockets("127.0.0.1", port, 2)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            conn, _ = slots[0][0].accept()   # the one queue, whichever descriptor takes it
            conn.close()
        inherited[0].close()
    finally:
        for slot in slots:
            slot[0].close()
    assert supervisor.inherited_sockets({}) is None   # not a worker


def test_a_worker_says_it_serves_on_its_pipe():
    read, write = os.pipe()
    supervisor.announce_ready({supervisor.READY_FD: str(write), supervisor.WORKER_ID: "2"})
    assert os.read(read, 100) == f"2 {os.getpid()}\n".encode()
    os.close(read)
    supervisor.announce_ready({})   # not a worker: nothing


def test_how_a_workers_end_is_described():
    assert supervisor._describe(-9) == "killed by SIGKILL"
    assert supervisor._describe(3) == "exit status 3"
