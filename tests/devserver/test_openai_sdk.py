"""The openai SDK (what the gateway's users and tests hold) talks to the stand-in."""

from __future__ import annotations

import openai
import pytest
from openai import AsyncOpenAI

from .helpers import CHAT


@pytest.fixture
async def sdk(client):
    sdk = AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="none", max_retries=0)
    yield sdk
    await sdk.close()


async def test_responses_and_conversations_through_the_sdk(sdk):
    conv = await sdk.conversations.create(metadata={"topic": "sdk"})
    first = await sdk.responses.create(model=CHAT, input="hello from sdk",
                                       conversation=conv.id)
    assert first.output_text == "Scripted reply (turn 1, 1 messages): hello from sdk"
    stream = await sdk.responses.create(model=CHAT, input="follow", conversation=conv.id,
                                        stream=True)
    events = [event async for event in stream]
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Scripted reply (turn 2, 3 messages): follow"
    items = await sdk.conversations.items.list(conv.id, order="asc")
    assert len(items.data) == 4
    inputs = await sdk.responses.input_items.list(first.id)
    assert inputs.data[0].type == "message"
    await sdk.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(first.id)


async def test_stream_helper_accumulates(sdk):
    async with sdk.responses.stream(model=CHAT, input="helper stream") as stream:
        final = await stream.get_final_response()
    assert final.output_text == "Scripted reply (turn 1, 1 messages): helper stream"


async def test_sdk_errors(sdk):
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.create(model="no-such-model", input="hi")
    with pytest.raises(openai.InternalServerError):
        await sdk.responses.create(model=CHAT, input="fail-upstream")
    with pytest.raises(openai.BadRequestError):
        await sdk.responses.create(model=CHAT, input="context-overflow")


async def test_chat_and_embeddings_through_the_sdk(sdk):
    completion = await sdk.chat.completions.create(
        model="scripted-chat", messages=[{"role": "user", "content": "hello via chat"}])
    assert completion.choices[0].message.content.endswith("hello via chat")
    chunks = [c async for c in await sdk.chat.completions.create(
        model="scripted-chat", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True})]
    assert chunks[-1].usage.total_tokens > 0
    emb = await sdk.embeddings.create(model="scripted-embed", input="hello")
    assert len(emb.data[0].embedding) == 384
    models = [m.id async for m in sdk.models.list()]
    assert models == ["scripted-chat", "scripted-embed", "scripted-mini"]
