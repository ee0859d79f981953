"""The `openai` dialect frames the same stream as OpenAI does: an `event:` line, then
`type` first and `sequence_number` last."""

from __future__ import annotations

import orjson
import pytest

from gateway.devserver import create_app

BODY = {"input": "Hello", "model": "scripted-chat", "stream": True, "metadata": {"scripted_deltas": "5"}}


def blocks(raw: bytes) -> list[bytes]:
    return [block for block in raw.split(b"\n\n") if block]


async def stream(client, dialect: str | None) -> bytes:
    metadata = {**BODY["metadata"], **({"scripted_dialect": dialect} if dialect else {})}
    resp = await client.post("/v1/responses", json={**BODY, "metadata": metadata})
    assert resp.status == 200
    return await resp.read()


async def test_openai_dialect_has_event_lines_type_first_and_the_same_events(client):
    llama = [orjson.loads(block[6:]) for block in blocks(await stream(client, None))]
    openai = blocks(await stream(client, "openai"))
    assert len(openai) == len(llama) == 12  # created, in_progress, item and part added, 5 deltas, 3 done
    for block, twin in zip(openai, llama):
        event_line, data_line = block.split(b"\n")
        event = orjson.loads(data_line[6:])
        assert event_line == b"event: " + event["type"].encode()
        assert data_line.startswith(b'data: {"type":"') and data_line.endswith(b',"sequence_number":%d}'
                                                                             % event["sequence_number"])
        assert event.keys() == twin.keys() and event["type"] == twin["type"]


@pytest.mark.parametrize("dialect, first", [("openai", b"event: response.created\n"), ("llama-stack", b'data: {"response"')])
async def test_server_wide_dialect(aiohttp_client, dialect, first):
    client = await aiohttp_client(create_app(dialect=dialect, record=False))
    assert (await stream(client, None)).startswith(first)
