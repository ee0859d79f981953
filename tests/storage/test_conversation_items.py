"""OpenAI's Conversations API's records on both engines (issue 23): metadata, items in
order, pending items taken once by the next turn (and remembered across a restart of
a single-writer process), and the items going with their deleted conversation."""

from __future__ import annotations

from gateway.storage.conversation_items import ConversationItems
from gateway.storage.conversations import ConversationRepository
from gateway.storage.history import ConversationHistory
from gateway.storage.open import open_database
from tests.storage.test_conversations import conversation


def item(item_id: str) -> dict:
    return {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": item_id}]}


async def test_metadata_items_and_pending(database_config):
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    items = ConversationItems(db)
    await items.load()
    await repo.save(conversation("a"), None)
    assert await items.metadata("a") is None   # a turn made it, not the API
    assert await items.set_metadata("a", {"k": "v"}) and await items.metadata("a") == {"k": "v"}
    assert not await items.set_metadata("nope", {})

    await items.add("a", [item("m1"), item("m2")], pending=True)
    await items.add("a", [item("m3")], pending=False)
    assert [i["id"] for i in await items.all("a")] == ["m1", "m2", "m3"]
    assert (await items.get("a", "m2"))["content"][0]["text"] == "m2" and await items.get("b", "m2") is None

    again = ConversationItems(db)   # a restarted process knows what is pending
    await again.load()
    assert [i["id"] for i in await again.take_pending("a")] == ["m1", "m2"]
    assert await again.take_pending("a") == [] and await items.take_pending("b") == []
    assert [i["id"] for i in await items.all("a")] == ["m1", "m2", "m3"]   # still listed
    items.restore_soon("a", ("m2",))   # a failed turn gives them back; the next take waits for it
    assert [i["id"] for i in await items.take_pending("a")] == ["m2"]
    await items.restore("a", ("m1", "nope"))
    assert [i["id"] for i in await items.take_pending("a")] == ["m1"]

    assert await items.delete("a", "m2") and not await items.delete("a", "m2")
    await ConversationHistory(db, repo).delete("a")
    assert await items.all("a") == []
    await db.close()


async def test_held_items_of_an_upstreams_conversation(database_config):
    """An upstream's conversation: only the pending items are the gateway's to list, read,
    count and delete; a recorded turn's items go (`discard`), those given back stay."""
    db = await open_database(database_config)
    repo = ConversationRepository(db)
    items = ConversationItems(db)
    await items.load()
    await repo.save(conversation("u"), None)
    await items.add("u", [item("h1"), item("h2")], pending=True)
    assert [i["id"] for i in await items.take_pending("u")] == ["h1", "h2"]
    await items.add("u", [item("h3")], pending=True)
    assert [i["id"] for i in await items.all("u", pending_only=True)] == ["h3"]
    assert await items.count("u", pending_only=True) == 1 and await items.count("u") == 3
    assert await items.get("u", "h1", pending_only=True) is None and await items.get("u", "h1") is not None
    assert not await items.delete("u", "h1", pending_only=True)

    await items.restore("u", ("h2",))   # given back by a turn that failed
    await items.discard("u", ("h1", "h2", "h3"))   # a recorded turn took h1 (h2, h3 are pending)
    assert [i["id"] for i in await items.all("u")] == ["h2", "h3"]
    assert await items.delete("u", "h3", pending_only=True)
    assert [i["id"] for i in await items.take_pending("u")] == ["h2"]
    await db.close()
