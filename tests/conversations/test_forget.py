"""Deleting a conversation (`conversations/forget.py`) on both engines: once however
many try, its upstream state deleted after the commit, and retried until the upstream
confirms when it could not be reached."""

from __future__ import annotations

import asyncio

from gateway.conversations.forget import Forgetting
from gateway.schema.errors import upstream_unavailable
from gateway.storage.conversations import ConversationRepository
from gateway.storage.history import ConversationHistory
from gateway.storage.open import open_database
from tests.storage.test_conversations import conversation, turn


class Upstream:
    def __init__(self) -> None:
        self.reachable = True
        self.forgotten: list[tuple[str | None, tuple[str, ...]]] = []

    async def forget_conversation(self, upstream_id, response_ids) -> None:
        if not self.reachable:
            raise upstream_unavailable("Llama Stack")
        self.forgotten.append((upstream_id, response_ids))


async def test_deleted_once_and_retried_until_the_upstream_confirms(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    history = ConversationHistory(db, repo)
    upstream = Upstream()

    async def backend():
        return upstream

    forgetting = Forgetting(history, backend)
    cleaned = []

    async def also(deleted):
        cleaned.append(deleted.conversation_id)

    forgetting.also.append(also)
    await repo.save(conversation("c1"), turn("r1", "c1"))
    await repo.save(conversation("c2"), turn("r2", "c2"))

    results = await asyncio.gather(*(forgetting.delete("c1") for _ in range(3)))
    assert sum(result is not None for result in results) == 1
    assert upstream.forgotten == [("conv_c1", ("r1",))] and cleaned == ["c1"]
    assert await forgetting.retry(older_than=0) == 0   # nothing pending

    assert all(result.unreachable is None for result in results if result is not None)

    upstream.reachable = False
    forgotten = await forgetting.delete("c2")   # deleted here; upstream pending
    assert forgotten is not None and forgotten.unreachable is not None
    assert forgotten.unreachable.status == 503
    assert await forgetting.retry(older_than=0) == 0
    upstream.reachable = True
    assert await forgetting.retry(older_than=3600) == 0   # not yet due
    assert await forgetting.retry(older_than=0) == 1
    assert upstream.forgotten[-1] == ("conv_c2", ("r2",))
    assert await forgetting.retry(older_than=0) == 0

    # A turn still running when its conversation was deleted records it again: the next
    # round deletes it again, with that turn's upstream state.
    await repo.save(conversation("c2"), turn("r9", "c2"))
    assert await history.get("c2") is not None
    await forgetting.retry(older_than=3600)
    assert await history.get("c2") is None and upstream.forgotten[-1] == ("conv_c2", ("r9",))
    assert await history.resurrected() == []
    await db.close()


async def test_deleting_again_retries_the_pending_upstream_deletion_at_once(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    upstream = Upstream()

    async def backend():
        return upstream

    forgetting = Forgetting(ConversationHistory(db, repo), backend)
    await repo.save(conversation("c3"), turn("r3", "c3"))
    assert await forgetting.finish("c3") is None   # nothing pending: nothing asked
    upstream.reachable = False
    assert (await forgetting.delete("c3")).unreachable is not None
    assert (await forgetting.finish("c3")).status == 503   # still unreachable: still pending
    upstream.reachable = True
    assert await forgetting.finish("c3") is None and upstream.forgotten == [("conv_c3", ("r3",))]
    assert await forgetting.finish("c3") is None and len(upstream.forgotten) == 1   # done: not asked again
    assert await forgetting.retry(older_than=0) == 0
    await db.close()
