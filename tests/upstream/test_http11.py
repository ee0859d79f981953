"""The small HTTP/1.1 client's connection pool, against a raw asyncio server that counts
connections and answers as told: kept-alive connections reused, at most `limit` at once,
a kept-alive connection the upstream had closed retried on a new one, idle ones closed,
an exchange closed early aborting its connection, bodies delimited three ways, and
`ConnectFailed` when nothing listens."""

from __future__ import annotations

import asyncio

import pytest

from gateway.upstream.http11 import ConnectFailed, Disconnected, Pool

GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Upstream:
    """`answers`: what each request read gets written back, in turn; `then_close`: close
    the connection after answering (without saying so in the answer); `drop_second`:
    close a connection when its second request arrives, unanswered (the race of an
    upstream closing a kept-alive connection as the client reuses it)."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed = 0
        self.answers: list[bytes] = []
        self.then_close = False
        self.drop_second = False
        self.server: asyncio.Server | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                served += 1
                if self.drop_second and served == 2:
                    break
                writer.write(self.answers.pop(0) if self.answers else OK)
                await writer.drain()
                if self.then_close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]


@pytest.fixture
async def upstream():
    found = Upstream()
    found.server = await asyncio.start_server(found.serve, "127.0.0.1", 0)
    yield found
    found.server.close()


def pool_for(upstream: Upstream, limit: int = 4, idle_s: float = 30.0) -> Pool:
    return Pool("127.0.0.1", upstream.port, None, limit=limit, connect_timeout=2, idle_s=idle_s)


async def get(pool: Pool) -> tuple[int, bytes]:
    exchange = await pool.exchange(GET, 2)
    return exchange.status, await exchange.read()


async def test_a_kept_alive_connection_is_reused(upstream):
    pool = pool_for(upstream)
    assert [await get(pool) for _ in range(3)] == [(200, b"ok")] * 3
    assert upstream.connections == 1
    pool.close()


async def test_at_most_limit_connections_at_once(upstream):
    pool = pool_for(upstream, limit=1)
    first = await pool.exchange(GET, 2)
    second = asyncio.ensure_future(get(pool))
    await asyncio.sleep(0.1)
    assert not second.done()   # waits for the slot
    assert await first.read() == b"ok"
    assert await second == (200, b"ok") and upstream.connections == 1
    pool.close()


async def test_a_kept_alive_connection_the_upstream_closed_is_retried_on_a_new_one(upstream):
    upstream.drop_second = True
    pool = pool_for(upstream)
    assert await get(pool) == (200, b"ok")
    # Reused, the connection closes unanswered: the request never reached the upstream,
    # so it goes again on a new connection, and the caller sees only the answer.
    assert await get(pool) == (200, b"ok")
    assert upstream.connections == 2
    pool.close()


async def test_a_connection_closed_after_an_answer_is_not_reused(upstream):
    upstream.then_close = True
    pool = pool_for(upstream)
    assert await get(pool) == (200, b"ok")
    await asyncio.sleep(0.05)   # the pool sees it close while idle
    assert await get(pool) == (200, b"ok")
    assert upstream.connections == 2
    pool.close()


async def test_idle_connections_are_closed(upstream):
    pool = pool_for(upstream, idle_s=0.1)
    await get(pool)
    await asyncio.sleep(0.4)
    assert upstream.closed == 1
    await get(pool)
    assert upstream.connections == 2
    pool.close()


async def test_an_exchange_closed_before_its_body_ended_aborts_the_connection(upstream):
    upstream.answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart"]
    pool = pool_for(upstream)
    exchange = await pool.exchange(GET, 2)
    assert await exchange.readany() == b"part"
    exchange.close()
    await asyncio.sleep(0.05)
    assert upstream.closed == 1   # the upstream saw the client go away
    assert await get(pool) == (200, b"ok") and upstream.connections == 2
    pool.close()


async def test_bodies_by_length_chunks_or_until_the_connection_closes(upstream):
    upstream.answers = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"]
    pool = pool_for(upstream)
    assert await get(pool) == (200, b"abcde")
    assert await get(pool) == (404, b"")
    upstream.answers = [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"]
    upstream.then_close = True
    assert await get(pool) == (200, b"until the end")
    pool.close()


async def test_an_answer_that_is_not_http_is_a_disconnect(upstream):
    upstream.answers = [b"SSH-2.0-OpenSSH\r\n\r\n"]
    pool = pool_for(upstream)
    with pytest.raises(Disconnected, match="not valid HTTP"):
        await pool.exchange(GET, 2)
    pool.close()


async def test_nothing_listening_is_connect_failed(unused_tcp_port):
    pool = Pool("127.0.0.1", unused_tcp_port, None, limit=1, connect_timeout=2, idle_s=30)
    with pytest.raises(ConnectFailed, match=f"127.0.0.1:{unused_tcp_port}"):
        await pool.exchange(GET, 2)
    with pytest.raises(ConnectFailed):   # the slot was given back: not stuck waiting
        await asyncio.wait_for(pool.exchange(GET, 2), 2)
    pool.close()


async def test_a_body_past_the_high_water_mark_is_read_whole_at_once(upstream):
    # `read()` never waits for a `readany()` to resume reading (before the fix: stuck
    # until the read timeout, 2 s here, for any JSON answer over 256 KiB).
    body = b"x" * (2 << 20)
    upstream.answers = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]
    pool = pool_for(upstream)
    started = asyncio.get_running_loop().time()
    assert await get(pool) == (200, body)
    assert asyncio.get_running_loop().time() - started < 1
    assert await get(pool) == (200, b"ok")   # the connection is kept for the next
    pool.close()
