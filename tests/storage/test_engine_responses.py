"""The local engine's response store, on both engines: upserts keep creation order,
reads are scoped."""

from __future__ import annotations

from gateway.storage.open import open_database
from gateway.storage.engine_responses import ResponseStore


def response(response_id: str, status: str = "completed") -> dict:
    return {"id": response_id, "object": "response", "status": status, "output": []}


async def test_a_save_queued_again_is_written_once_in_its_newer_state(database_config):
    db = await open_database(database_config)
    store = ResponseStore(db)
    blocker = store.save("resp_0", "alice", lambda: (response("resp_0"), [], []), wait=True)  # in flight
    taken = []
    store.save("resp_1", "alice", lambda: taken.append("first") or (response("resp_1", "in_progress"), [], []),
               wait=False)
    done = store.save("resp_1", "alice", lambda: taken.append("second") or (response("resp_1"), [], []), wait=True)
    await blocker
    await done
    assert taken == ["second"]
    assert (await store.get("resp_1", "alice")).response["status"] == "completed"
    await db.close()


async def test_save_get_scoped_and_upserted(database_config):
    db = await open_database(database_config)
    store = ResponseStore(db)
    store.save("resp_1", "alice", lambda: (response("resp_1", "in_progress"), [{"id": "msg_1"}], [{"id": "msg_1"}]),
               wait=False)
    await store.save("resp_2", "alice", lambda: (response("resp_2"), [], []), wait=True)
    await store.save("resp_1", "alice", lambda: (response("resp_1"), [{"id": "msg_1"}],
                                                 [{"id": "msg_1"}, {"id": "msg_2"}]), wait=True)
    found = await store.get("resp_1", "alice")
    assert found is not None and found.response["status"] == "completed"
    assert found.input == [{"id": "msg_1"}] and len(found.context) == 2
    assert await store.get("resp_1", "bob") is None
    # The upsert kept resp_1 first in creation order.
    page, more = await store.list("alice", after=None, limit=10, descending=False)
    assert [r["id"] for r in page] == ["resp_1", "resp_2"] and more is False
    page, more = await store.list("alice", after="resp_2", limit=1, descending=True)
    assert [r["id"] for r in page] == ["resp_1"] and more is False
    assert await store.list("alice", after="resp_x", limit=1, descending=True) is None
    assert await store.delete("resp_1", "bob") is False
    assert await store.delete("resp_1", "alice") is True and await store.get("resp_1", "alice") is None
    await db.close()
