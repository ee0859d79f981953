"""Conversations API of the Llama Stack stand-in."""

from __future__ import annotations

import json

from gateway.devserver import create_app

from .helpers import fixture_text


async def make(client, **body):
    resp = await client.post("/v1/conversations", json=body)
    assert resp.status == 200
    return await resp.json()


async def test_create_get_update_delete(client):
    conv = await make(client, metadata={"topic": "demo"},
                      items=[{"type": "message", "role": "user", "content": "Seed"}])
    assert list(conv) == ["id", "object", "created_at", "metadata", "items"]
    assert conv["id"].startswith("conv_") and len(conv["id"]) == 5 + 48
    assert conv["items"] is None and conv["metadata"] == {"topic": "demo"}
    assert await (await client.get(f"/v1/conversations/{conv['id']}")).json() == conv
    updated = await (await client.post(f"/v1/conversations/{conv['id']}",
                                       json={"metadata": {"topic": "renamed"}})).json()
    assert updated == {**conv, "metadata": {"topic": "renamed"}}
    deleted = await (await client.delete(f"/v1/conversations/{conv['id']}")).json()
    assert deleted == {"id": conv["id"], "object": "conversation.deleted", "deleted": True}
    assert (await client.get(f"/v1/conversations/{conv['id']}")).status == 404


async def test_empty_create(client):
    conv = await make(client)
    assert conv["metadata"] is None


async def test_bad_and_missing_ids(client):
    resp = await client.get("/v1/conversations/conv_doesnotexist")
    assert resp.status == 400
    assert await resp.text() == fixture_text("err-conversations-get-missing.json").strip()
    missing = "conv_" + "0" * 48
    for method, path in (("GET", ""), ("DELETE", ""), ("GET", "/items"), ("POST", "/items")):
        resp = await client.request(method, f"/v1/conversations/{missing}{path}",
                                    json={"items": []} if method == "POST" else None)
        assert resp.status == 404
        assert await resp.json() == {"detail": f"Conversation '{missing}' not found."}


async def test_items_add_list_get_delete(client):
    conv = await make(client, items=[{"type": "message", "role": "user", "content": "Seed"}])
    base = f"/v1/conversations/{conv['id']}/items"
    added = await (await client.post(base, json={"items": [
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "added by hand"}]}]})).json()
    recorded = json.loads(fixture_text("conversations-items-add.json"))
    assert list(added) == list(recorded)
    assert [list(i) for i in added["data"]] == [list(i) for i in recorded["data"]]
    new_id = added["data"][0]["id"]
    assert added["first_id"] == added["last_id"] == new_id and len(new_id) == 4 + 48

    desc = await (await client.get(base)).json()
    assert [i["id"] for i in desc["data"]][0] == new_id
    assert desc["has_more"] is False
    asc = await (await client.get(base + "?order=asc")).json()
    assert asc["data"] == desc["data"][::-1]
    limited = await (await client.get(base + "?order=asc&limit=1")).json()
    assert len(limited["data"]) == 1 and limited["has_more"] is True

    item = await (await client.get(f"{base}/{new_id}")).json()
    assert item == added["data"][0]
    assert (await client.get(f"{base}/msg_nope")).status == 404
    resp = await client.delete(f"{base}/{new_id}")
    assert (await resp.json())["deleted"] is True
    assert len((await (await client.get(base)).json())["data"]) == 1


async def test_items_validation(client):
    conv = await make(client)
    resp = await client.post(f"/v1/conversations/{conv['id']}/items", json={"items": "x"})
    assert resp.status == 400
    resp = await client.post(f"/v1/conversations/{conv['id']}/items", json={})
    assert resp.status == 400


async def test_llama_stack_items_are_timed_in_whole_seconds(aiohttp_client):
    """`--llama-stack-items`: Llama Stack 0.7.3's timing (add-items: now + index, in whole
    seconds) read back in that order, a turn's string content kept, and a later turn
    reading the last turn's messages, not the items added since."""
    client = await aiohttp_client(create_app(llama_stack_items=True))
    conv = await make(client)
    base = f"/v1/conversations/{conv['id']}/items"

    def message(text):
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    assert (await client.post(base, json={"items": [message("A"), message("B")]})).status == 200
    assert (await client.post(base, json={"items": [message("C")]})).status == 200
    listed = (await (await client.get(base + "?order=asc")).json())["data"]
    # A at t, B at t + 1, C at t (the same second as A, B's call): A, C, B (unless the
    # clock ticked between the two calls).
    order = [item["content"][0]["text"] for item in listed]
    assert order in (["A", "C", "B"], ["A", "B", "C"]) and all(item["status"] is None for item in listed)

    first = await (await client.post("/v1/responses", json={
        "model": "scripted/scripted-chat", "conversation": conv["id"],
        "input": [{"type": "message", "role": "user", "content": "first turn"}]})).json()
    assert first["status"] == "completed"
    copies = (await (await client.get(base + "?order=asc&limit=100")).json())["data"]
    assert {"type": "message", "role": "user", "content": "first turn"}.items() <= \
        next(item for item in copies if item.get("content") == "first turn").items()
    assert (await client.post(base, json={"items": [message("later")]})).status == 200
    second = await (await client.post("/v1/responses", json={
        "model": "scripted/scripted-chat", "conversation": conv["id"], "input": "second turn"})).json()
    read = await (await client.get(f"/v1/responses/{second['id']}/input_items?order=asc")).json()
    assert "later" not in json.dumps(read["data"]) and "first turn" in json.dumps(read["data"])
