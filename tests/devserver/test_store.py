"""The stand-in's in-memory stores: bounded (the oldest dropped first, so a benchmark
that runs for hours cannot exhaust memory), and the listing's order, model filter,
`after` cursor and `has_more`."""

from __future__ import annotations

from gateway.devserver.store import CONVERSATION_ID_RE, ConversationStore, ResponseStore, StoredResponse


def stored(response_id: str, model: str = "m") -> StoredResponse:
    return StoredResponse({"id": response_id, "model": model}, [])


def ids(records: list[StoredResponse]) -> list[str]:
    return [record.response["id"] for record in records]


def test_responses_are_bounded_oldest_first():
    store = ResponseStore(limit=2)
    for response_id in ("r1", "r2", "r3"):
        store.put(stored(response_id))
    assert store.get("r1") is None and store.get("r3") is not None
    assert store.delete("r2") and not store.delete("r2")


def test_a_page_in_either_order_after_a_cursor_with_has_more():
    store = ResponseStore()
    for n, model in enumerate(("a", "b", "a", "a", "b")):
        store.put(stored(f"r{n}", model))
    page, more = store.page(limit=2, after=None, order="desc")
    assert (ids(page), more) == (["r4", "r3"], True)
    page, more = store.page(limit=2, after="r3", order="desc")
    assert (ids(page), more) == (["r2", "r1"], True)
    page, more = store.page(limit=10, after="r1", order="asc", model="a")   # r1 is not an `a`: from the start
    assert (ids(page), more) == (["r0", "r2", "r3"], False)
    page, more = store.page(limit=1, after="r2", order="asc", model="a")
    assert (ids(page), more) == (["r3"], False)


def test_conversations_have_llama_stacks_ids_and_are_bounded():
    store = ConversationStore(limit=2)
    first = store.create({"k": "v"})
    assert CONVERSATION_ID_RE.fullmatch(first.id)
    assert first.as_json() == {"id": first.id, "object": "conversation", "created_at": first.created_at,
                               "metadata": {"k": "v"}, "items": None}
    second, third = store.create(None), store.create(None)
    assert store.get(first.id) is None and store.get(second.id) is second and store.get(third.id) is third
    assert store.delete(third.id) and store.get(third.id) is None
