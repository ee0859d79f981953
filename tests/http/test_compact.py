"""What `/v1/responses/compact` reads besides its turn: the user text of each recorded turn
of the chain it compacts, oldest first, a fork followed back to where it forked, a chain
bounded; and a body over `max_input_bytes` refused before it is read whole. (The endpoint:
tests/e2e/test_compaction.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.http import compact
from gateway.http.compact import _read_capped, chain_questions
from gateway.schema.errors import ApiError
from gateway.turns.content import turn_content


class Conversations:
    """Recorded turns: response id -> (previous id, prior id at a fork, question)."""

    def __init__(self, turns: dict[str, tuple[str | None, str | None, str]]):
        self.turns = turns

    async def find_turn(self, response_id: str):
        found = self.turns.get(response_id)
        if found is None:
            return None
        previous, prior, _ = found
        turn = SimpleNamespace(response_id=response_id, previous_response_id=previous, prior_response_id=prior)
        return turn, None

    async def content(self, response_id: str) -> str:
        return turn_content(self.turns[response_id][2], {"output": []})


async def test_the_chains_questions_oldest_first():
    turns = Conversations({"r1": (None, None, "first"), "r2": ("r1", None, ""), "r3": ("r2", None, "third")})
    assert await chain_questions(turns, "r3") == ["first", "third"]   # a turn without user text adds nothing
    assert await chain_questions(turns, None) == []
    assert await chain_questions(turns, "unknown") == []


async def test_a_fork_is_followed_to_where_it_forked():
    # f1 started a new conversation from r2: its own chain has no previous id, its prior is r2.
    turns = Conversations({"r1": (None, None, "a"), "r2": ("r1", None, "b"), "f1": (None, "r2", "c"),
                           "f2": ("f1", None, "d")})
    assert await chain_questions(turns, "f2") == ["a", "b", "c", "d"]


async def test_a_chain_is_bounded(monkeypatch):
    monkeypatch.setattr(compact, "MAX_CHAIN_TURNS", 3)
    turns = Conversations({f"r{n}": (f"r{n - 1}" if n else None, None, f"q{n}") for n in range(10)})
    assert await chain_questions(turns, "r9") == ["q7", "q8", "q9"]


async def test_a_body_over_the_limit_is_413_before_or_after_it_is_read(aiohttp_client):
    announced = make_mocked_request("POST", "/v1/responses/compact", headers={"Content-Length": "2048"})
    with pytest.raises(ApiError) as refused:
        await _read_capped(announced, 1024)
    assert refused.value.status == 413

    async def handler(request: web.Request) -> web.Response:
        try:
            return web.Response(text=str(len(await _read_capped(request, 1024))))
        except ApiError as exc:
            return web.Response(status=exc.status)

    app = web.Application()
    app.router.add_post("/", handler)
    client = await aiohttp_client(app)

    async def chunks(size: int):   # chunked: no Content-Length to refuse it by
        for _ in range(size // 256):
            yield b"x" * 256

    assert await (await client.post("/", data=chunks(1024))).text() == "1024"
    assert (await client.post("/", data=chunks(1280))).status == 413
