"""Conversations API of the Llama Stack stand-in."""

from __future__ import annotations

import json

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
