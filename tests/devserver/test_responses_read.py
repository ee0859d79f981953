"""GET / list / input_items / delete / cancel of stored responses."""

from __future__ import annotations

from .helpers import CHAT, fixture_text, sse_events


async def create(client, text, **extra):
    resp = await client.post("/v1/responses", json={"model": CHAT, "input": text, **extra})
    assert resp.status == 200
    return await resp.json()


async def test_get_returns_the_stored_response(client):
    created = await create(client, "Hello there")
    resp = await client.get(f"/v1/responses/{created['id']}")
    assert resp.status == 200
    assert await resp.json() == created


async def test_streamed_response_is_stored_completed(client):
    resp = await client.post("/v1/responses", json={"model": CHAT, "input": "hi", "stream": True})
    final = sse_events(await resp.text())[-1]["response"]
    stored = await (await client.get(f"/v1/responses/{final['id']}")).json()
    assert stored == final and stored["status"] == "completed"


async def test_missing_response_bodies(client):
    for method, path in (("GET", "/v1/responses/resp_doesnotexist"),
                         ("GET", "/v1/responses/resp_doesnotexist/input_items"),
                         ("DELETE", "/v1/responses/resp_doesnotexist")):
        resp = await client.request(method, path)
        assert resp.status == 404
        assert await resp.text() == fixture_text("err-responses-get-missing.json").strip()


async def test_delete(client):
    created = await create(client, "bye")
    resp = await client.delete(f"/v1/responses/{created['id']}")
    assert await resp.json() == {"id": created["id"], "object": "response", "deleted": True}
    assert (await client.get(f"/v1/responses/{created['id']}")).status == 404
    assert (await client.delete(f"/v1/responses/{created['id']}")).status == 404


async def test_store_false_is_not_kept(client):
    created = await create(client, "not stored", store=False)
    assert created["store"] is False
    assert (await client.get(f"/v1/responses/{created['id']}")).status == 404


async def test_list_newest_first_with_input(client):
    ids = [(await create(client, f"message {i}"))["id"] for i in range(4)]
    body = await (await client.get("/v1/responses?limit=3")).json()
    assert list(body) == ["data", "has_more", "first_id", "last_id", "object"]
    assert [r["id"] for r in body["data"]] == ids[::-1][:3]
    assert body["has_more"] is True
    assert body["first_id"] == ids[3] and body["last_id"] == ids[1]
    first = body["data"][0]
    assert list(first)[-1] == "input"
    assert first["input"][0]["content"] == [{"text": "message 3", "type": "input_text"}]
    assert first["input"][0]["id"].startswith("msg_")
    page2 = await (await client.get(f"/v1/responses?limit=3&after={ids[1]}")).json()
    assert [r["id"] for r in page2["data"]] == [ids[0]] and page2["has_more"] is False


async def test_input_items_order(client):
    first = await create(client, "one")
    second = await create(client, "two", previous_response_id=first["id"])
    items = (await (await client.get(f"/v1/responses/{second['id']}/input_items")).json())["data"]
    assert items[0] == {"content": "two", "role": "user", "type": "message", "id": None,
                        "status": None}
    assert [i["role"] for i in items] == ["user", "assistant", "user"]
    asc = (await (await client.get(
        f"/v1/responses/{second['id']}/input_items?order=asc")).json())["data"]
    assert asc == items[::-1]


async def test_background_and_cancel(client):
    queued = await create(client, "in the background", background=True)
    assert queued["status"] == "queued" and queued["temperature"] is None
    stored = await (await client.get(f"/v1/responses/{queued['id']}")).json()
    assert stored["status"] == "completed" and stored["background"] is True
    plain = await create(client, "not background")
    resp = await client.post(f"/v1/responses/{plain['id']}/cancel")
    assert resp.status == 409
    assert "only background responses can be cancelled" in (await resp.json())["detail"]
