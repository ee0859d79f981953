"""Role 1: the Chat Completions backend behind a real Llama Stack."""

from __future__ import annotations

import base64
import json
import math
import struct

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types import CreateEmbeddingResponse

from .helpers import fixture_text, sse_data

WEATHER_TOOL = {"type": "function", "function": {
    "type": "function", "name": "get_weather", "description": "Get the weather for a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"]}}}


async def chat(client, **body):
    body.setdefault("model", "scripted-chat")
    return await client.post("/v1/chat/completions", json=body)


async def test_health_and_models(client):
    for path in ("/health", "/v1/health"):
        resp = await client.get(path)
        assert resp.status == 200
        assert await resp.json() == {"status": "OK"}
    body = await (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    kinds = {m["id"]: m["custom_metadata"]["model_type"] for m in body["data"]}
    assert kinds == {"scripted-chat": "llm", "scripted-embed": "embedding", "scripted-mini": "llm"}
    for model in body["data"]:
        assert set(model) == {"id", "object", "created", "owned_by", "custom_metadata"}
    assert (await client.get("/v1/models/scripted-chat")).status == 200
    assert (await client.get("/v1/models/nope")).status == 404


async def test_non_stream_matches_the_recorded_reply(client):
    resp = await chat(client, messages=[{"role": "user", "content": "hello via chat"}])
    assert resp.status == 200
    body = await resp.json()
    completion = ChatCompletion.model_validate(body)
    recorded = json.loads(fixture_text("chat-completions.json"))
    assert completion.choices[0].message.content == recorded["choices"][0]["message"]["content"]
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["id"].startswith("chatcmpl-")


async def test_stream_one_word_per_chunk_then_done(client):
    resp = await chat(client, messages=[{"role": "user", "content": "hello via chat"}],
                      stream=True)
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    payloads = sse_data(await resp.text())
    assert payloads[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(json.loads(p)) for p in payloads[:-1]]
    assert chunks[0].choices[0].delta.role == "assistant"
    words = [c.choices[0].delta.content for c in chunks[1:-1]]
    recorded = [json.loads(p)["choices"][0]["delta"]["content"]
                for p in sse_data(fixture_text("chat-completions-stream.sse"))[1:-1]]
    assert words == recorded
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)  # no include_usage, no usage chunk


async def test_stream_usage_chunk(client):
    resp = await chat(client, messages=[{"role": "user", "content": "hello via chat"}],
                      stream=True, stream_options={"include_usage": True})
    payloads = sse_data(await resp.text())
    assert payloads[-1] == "[DONE]"
    usage_chunk = ChatCompletionChunk.model_validate(json.loads(payloads[-2]))
    assert usage_chunk.choices == []
    assert usage_chunk.usage.prompt_tokens == 3 and usage_chunk.usage.completion_tokens == 9
    finish = json.loads(payloads[-3])
    assert finish["choices"][0]["finish_reason"] == "stop"


async def test_tool_call_non_stream(client):
    resp = await chat(client, messages=[{"role": "user",
                                         "content": "What is the weather in Paris? Use the tool."}],
                      tools=[WEATHER_TOOL])
    completion = ChatCompletion.model_validate(await resp.json())
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert call.function.arguments == '{"location": "Paris"}'
    assert call.id.startswith("call_") and len(call.id) == 5 + 24
    assert completion.usage.completion_tokens == 2


async def test_tool_call_stream_16_char_argument_deltas(client):
    resp = await chat(client, messages=[{"role": "user",
                                         "content": "What is the weather in Paris? Use the tool."}],
                      tools=[WEATHER_TOOL], stream=True, stream_options={"include_usage": True})
    payloads = sse_data(await resp.text())
    chunks = [ChatCompletionChunk.model_validate(json.loads(p)) for p in payloads[:-1]]
    calls = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices
             and c.choices[0].delta.tool_calls]
    assert calls[0].id.startswith("call_") and calls[0].function.name == "get_weather"
    assert calls[0].function.arguments == ""
    pieces = [c.function.arguments for c in calls[1:]]
    assert pieces == ['{"location": "Pa', 'ris"}']
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage.completion_tokens == 2


async def test_tool_result_turn(client):
    resp = await chat(client, tools=[WEATHER_TOOL], messages=[
        {"role": "user", "content": "What is the weather in Paris? Use the tool."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'}])
    body = await resp.json()
    assert body["choices"][0]["message"]["content"] == 'Tool said: {"temp_c": 21}'
    assert body["usage"]["prompt_tokens"] == 11


async def test_unknown_model_and_upstream_failure(client):
    resp = await chat(client, model="ghost-model", messages=[{"role": "user", "content": "hi"}])
    assert resp.status == 404
    body = await resp.json()
    assert body["error"]["message"] == "The model `ghost-model` does not exist."
    assert set(body["error"]) == {"message", "type", "param", "code"}
    resp = await chat(client, messages=[{"role": "user", "content": "please fail-upstream"}])
    assert resp.status == 500
    assert (await resp.json())["error"]["message"] == "scripted upstream failure"
    resp = await chat(client, messages=[{"role": "user", "content": "context-overflow now"}])
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == "context_length_exceeded"


async def test_bad_chat_requests(client):
    assert (await chat(client, messages=[])).status == 400
    resp = await client.post("/v1/chat/completions", data=b"{nope")
    assert resp.status == 400
    assert "error" in await resp.json()


async def test_chat_stream_triggers(client):
    resp = await chat(client, stream=True, messages=[{"role": "user",
                                                      "content": "please break-stream now"}])
    payloads = sse_data(await resp.text())
    assert len(payloads) == 1 + 3 and "[DONE]" not in payloads
    resp = await chat(client, stream=True, messages=[{"role": "user", "content": "error-event"}])
    payloads = sse_data(await resp.text())
    assert json.loads(payloads[1])["error"]["message"]
    assert payloads[-1] == "[DONE]"


async def test_chat_deltas_knob(client):
    resp = await chat(client, stream=True, metadata={"scripted_deltas": "25"},
                      messages=[{"role": "user", "content": "hi"}])
    payloads = sse_data(await resp.text())
    assert len(payloads) == 1 + 25 + 1 + 1  # role, deltas, finish, [DONE]


async def test_embeddings_are_deterministic_unit_vectors(client):
    body = {"model": "scripted-embed", "input": ["Falcon launch code", "red panda"],
            "encoding_format": "float"}
    first = await (await client.post("/v1/embeddings", json=body)).json()
    second = await (await client.post("/v1/embeddings", json=body)).json()
    assert first == second
    parsed = CreateEmbeddingResponse.model_validate(first)
    assert [d.index for d in parsed.data] == [0, 1]
    for item in parsed.data:
        assert len(item.embedding) == 384
        assert math.isclose(sum(v * v for v in item.embedding), 1.0, rel_tol=1e-9)
    assert parsed.usage.prompt_tokens == 5


async def test_embeddings_rank_shared_words_higher(client):
    body = {"model": "scripted/scripted-embed",
            "input": ["Falcon launch code", "The launch code for project Falcon is 7",
                      "The team mascot is a red panda"]}
    data = (await (await client.post("/v1/embeddings", json=body)).json())["data"]
    q, doc, other = (d["embedding"] for d in data)
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731
    assert dot(q, doc) > dot(q, other)


async def test_embeddings_dimensions_and_base64(client):
    body = {"model": "scripted-embed", "input": "hello", "dimensions": 64,
            "encoding_format": "base64"}
    data = (await (await client.post("/v1/embeddings", json=body)).json())["data"][0]
    raw = base64.b64decode(data["embedding"])
    vec = struct.unpack("<64f", raw)
    assert math.isclose(sum(v * v for v in vec), 1.0, rel_tol=1e-5)
    resp = await client.post("/v1/embeddings", json={"model": "scripted-chat", "input": "x"})
    assert resp.status == 404
    resp = await client.post("/v1/embeddings", json={"model": "scripted-embed", "input": 4.5})
    assert resp.status == 400


TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
                                                                                 "properties": {}}}}


async def _chunks(client, text, **body):
    resp = await chat(client, messages=[{"role": "user", "content": text}], stream=True,
                      stream_options={"include_usage": True}, **body)
    payloads = sse_data(await resp.text())
    assert payloads[-1] == "[DONE]"
    return [ChatCompletionChunk.model_validate(json.loads(p)) for p in payloads[:-1]]


async def test_think_aloud_streams_reasoning_content_first(client):
    chunks = await _chunks(client, "think-aloud please")
    reasoning = [c.choices[0].delta.model_extra.get("reasoning_content") for c in chunks if c.choices]
    assert "".join(r for r in reasoning if r) == "Thinking about: think-aloud please"
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 4


async def test_parallel_calls_call_every_tool_in_one_turn(client):
    chunks = await _chunks(client, "parallel-calls: use the tools", tools=[WEATHER_TOOL, TIME_TOOL])
    starts = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or () if call.id]
    assert [(call.index, call.function.name) for call in starts] == [(0, "get_weather"), (1, "get_time")]
    assert chunks[-2].choices[0].finish_reason == "tool_calls" and chunks[-1].usage is not None


async def test_finish_reason_triggers(client):
    for text, reason in (("finish-length now", "length"), ("content-filter now", "content_filter")):
        chunks = await _chunks(client, text)
        assert chunks[-2].choices[0].finish_reason == reason
        body = await (await chat(client, messages=[{"role": "user", "content": text}])).json()
        assert body["choices"][0]["finish_reason"] == reason


async def test_chat_deltas_for_every_stream(aiohttp_client):
    from gateway.devserver import create_app

    client = await aiohttp_client(create_app(chat_deltas=5))
    chunks = await _chunks(client, "hello there")
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) == 5
